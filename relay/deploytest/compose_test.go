package deploytest

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// loadCompose loads path with compose-spec's loader, which validates it
// against the Compose Specification's JSON schema, interpolates and
// normalizes it as `docker compose config` does.
func loadCompose(t *testing.T, path string) (*types.Project, error) {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	details := types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs}},
		Environment: types.Mapping{}, // what a fresh shell without COMPOSE_* has
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return loader.LoadWithContext(ctx, details, func(o *loader.Options) {
		o.ResolvePaths = true
	})
}

// TestComposeRejectsInvalid: the loader does validate (a broken file is
// refused), so TestCompose's pass means something.
func TestComposeRejectsInvalid(t *testing.T) {
	tests := []struct{ name, yaml string }{
		{"unknown service key", "services:\n  a:\n    image: x\n    bogus: 1\n"},
		{"dependency on a missing service", "services:\n  a:\n    image: x\n    depends_on: [b]\n"},
		{"bad condition", "services:\n  a:\n    image: x\n    depends_on:\n      b: {condition: when_ready}\n  b:\n    image: y\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "compose.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := loadCompose(t, path); err == nil {
				t.Fatalf("loaded an invalid file")
			}
		})
	}
}

// pkiDirs are where certs/dev-pki.sh and the compose file's certs service
// write development PKIs (gitignored, so absent from a fresh clone; Compose
// creates a missing bind-mount directory): the compose file may mount them.
var pkiDirs = []string{"certs/dev", "certs/compose"}

// TestCompose checks docker-compose.yaml: it loads (schema-valid), its
// builds name Dockerfiles and stages that exist, its bind mounts exist (or
// are the PKI certs/dev-pki.sh makes), dependencies wait for what they
// need, the agent reaches the relay and the fake API where they listen,
// every BETCODE_* variable is a real setting, and stops outlast drains.
func TestCompose(t *testing.T) {
	p, err := loadCompose(t, filepath.Join(repo, "docker-compose.yaml"))
	if err != nil {
		t.Fatalf("docker-compose.yaml: %v", err)
	}
	root, err := filepath.Abs(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"postgres", "relay", "agent", "fakeapi"} {
		if _, ok := p.Services[want]; !ok {
			t.Errorf("no service %q", want)
		}
	}
	healthy := map[string]bool{}
	for name, s := range p.Services {
		if s.HealthCheck != nil && !s.HealthCheck.Disable {
			healthy[name] = true
		}
		if s.Build != nil {
			df := filepath.Join(s.Build.Context, s.Build.Dockerfile)
			if _, err := os.Stat(df); err != nil {
				t.Errorf("service %s: build file: %v", name, err)
				continue
			}
			stages := parseDockerfile(t, df)
			found := s.Build.Target == ""
			for _, st := range stages {
				found = found || st.name == s.Build.Target
			}
			if !found {
				t.Errorf("service %s: %s has no stage %q", name, s.Build.Dockerfile, s.Build.Target)
			}
			if s.Build.Target == "" && stages[len(stages)-1].last("HEALTHCHECK") != nil {
				healthy[name] = true // the image's own
			}
		}
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			rel, err := filepath.Rel(root, v.Source)
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("service %s mounts %s, outside the repository", name, v.Source)
				continue
			}
			if slices.Contains(pkiDirs, filepath.ToSlash(rel)) {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("service %s mounts %s: %v", name, rel, err)
			}
		}
	}
	for name, s := range p.Services {
		for dep, d := range s.DependsOn {
			switch d.Condition {
			case types.ServiceConditionHealthy:
				if !healthy[dep] {
					t.Errorf("%s waits for %s to be healthy, which has no health check", name, dep)
				}
			case types.ServiceConditionCompletedSuccessfully:
				if r := p.Services[dep].Restart; r != "" && r != "no" {
					t.Errorf("%s waits for %s to complete, which restarts (%s)", name, dep, r)
				}
			}
		}
	}
	checkComposeWiring(t, p)
	checkComposeEnv(t, p)
	checkComposeBootstrap(t, p)
}

// checkComposeBootstrap: `docker compose up` alone is the start. The PKI
// is made inside Compose (no step on the host), the relay waits for a
// healthy PostgreSQL and bootstraps the first administrator (its token is
// printed once), the agent's machine certificate is owned by that
// administrator, and the header says so.
func checkComposeBootstrap(t *testing.T, p *types.Project) {
	t.Helper()
	relay, certs := p.Services["relay"], p.Services["certs"]
	if d, ok := relay.DependsOn["postgres"]; !ok || d.Condition != types.ServiceConditionHealthy {
		t.Errorf("relay: want depends_on postgres: service_healthy (it migrates at start), got %+v", relay.DependsOn)
	}
	if v := value(relay.Environment, "BETCODE_RELAY_BOOTSTRAP_ADMIN"); v == "false" {
		t.Errorf("relay: BETCODE_RELAY_BOOTSTRAP_ADMIN=%s: docker compose up must print the first sign-in", v)
	}
	name := value(relay.Environment, "BETCODE_RELAY_BOOTSTRAP_ADMIN_NAME")
	if name == "" {
		name = "admin"
	}
	script := strings.Join(certs.Command, " ")
	for _, want := range []string{"certs init", "relay", "certs machine", "--machine-id " + value(p.Services["agent"].Environment, "BETCODE_MACHINE_NAME"), "--owner user:" + name} {
		if !strings.Contains(script, want) {
			t.Errorf("certs service: its script lacks %q (the PKI is made in Compose, the agent owned by the bootstrapped administrator %s):\n%s", want, name, script)
		}
	}
	src, err := os.ReadFile(filepath.Join(repo, "docker-compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	header, _, _ := strings.Cut(string(src), "\nname:")
	for _, want := range []string{"docker compose up --build\n", "betcode login --relay localhost:8443 --relay-ca certs/compose/ca.crt", "BETCODE_RELAY_BOOTSTRAP_ADMIN"} {
		if !strings.Contains(header, want) {
			t.Errorf("docker-compose.yaml's header lacks %q", want)
		}
	}
	if strings.Contains(header, "admin user create") || strings.Contains(header, "dev-pki.sh") {
		t.Errorf("docker-compose.yaml's header still has manual steps before docker compose up")
	}
}

// checkComposeWiring: the agent dials the relay's service name and listen
// port, and Claude Code the fake API's; the relay's store is the postgres
// service.
func checkComposeWiring(t *testing.T, p *types.Project) {
	t.Helper()
	relay, agent, fake := p.Services["relay"], p.Services["agent"], p.Services["fakeapi"]
	_, relayPort, _ := net.SplitHostPort(value(relay.Environment, "BETCODE_RELAY_LISTEN"))
	if got, want := value(agent.Environment, "BETCODE_RELAY"), net.JoinHostPort("relay", relayPort); got != want {
		t.Errorf("agent dials %q, the relay listens at %q", got, want)
	}
	if !dependsOn(agent, "relay") || !dependsOn(agent, "fakeapi") || !dependsOn(relay, "postgres") {
		t.Errorf("start order: agent needs relay and fakeapi, relay needs postgres")
	}
	u, err := url.Parse(value(agent.Environment, "ANTHROPIC_BASE_URL"))
	if err != nil || u.Hostname() != "fakeapi" {
		t.Fatalf("agent's ANTHROPIC_BASE_URL %v: want the fakeapi service", u)
	}
	listen := ""
	for i, a := range fake.Command {
		if a == "--listen" && i+1 < len(fake.Command) {
			listen = fake.Command[i+1]
		}
	}
	if _, port, _ := net.SplitHostPort(listen); port != u.Port() {
		t.Errorf("fake API listens on %q, the agent calls port %q", listen, u.Port())
	}
	db, err := url.Parse(value(relay.Environment, "BETCODE_RELAY_DATABASE_URL"))
	if err != nil || db.Hostname() != "postgres" || db.User.Username() != value(p.Services["postgres"].Environment, "POSTGRES_USER") {
		t.Errorf("relay's database URL %v does not name the postgres service and its user", db)
	}
	for name, drain := range map[string]time.Duration{"relay": durationEnv(t, relay, "BETCODE_RELAY_DRAIN_GRACE"), "agent": 30 * time.Second} {
		s := p.Services[name]
		if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) < drain+10*time.Second {
			t.Errorf("%s: stop_grace_period %v does not outlast its drain (%v) and shutdown", name, s.StopGracePeriod, drain)
		}
	}
}

var agentKey = regexp.MustCompile(`\{Name: "([a-z0-9-]+)"`)

// checkComposeEnv: every BETCODE_RELAY_* of the relay is a flag of
// betcode-relay serve and every BETCODE_* of the agent a key of
// agent/config, so that none is silently ignored.
func checkComposeEnv(t *testing.T, p *types.Project) {
	t.Helper()
	relayFlags := serveFlags(t)
	src, err := os.ReadFile(filepath.Join(repo, "agent", "config", "keys.go"))
	if err != nil {
		t.Fatal(err)
	}
	agentKeys := map[string]bool{}
	for _, m := range agentKey.FindAllSubmatch(src, -1) {
		agentKeys[string(m[1])] = true
	}
	check := func(service, prefix string, known map[string]bool) {
		for k := range p.Services[service].Environment {
			if name, ok := strings.CutPrefix(k, prefix); ok && !known[strings.ReplaceAll(strings.ToLower(name), "_", "-")] {
				t.Errorf("%s: %s is no setting of %s", service, k, service)
			}
		}
	}
	check("relay", "BETCODE_RELAY_", relayFlags)
	check("agent", "BETCODE_", agentKeys)
}

func value(m types.MappingWithEquals, key string) string {
	if v := m[key]; v != nil {
		return *v
	}
	return ""
}

func dependsOn(s types.ServiceConfig, dep string) bool {
	_, ok := s.DependsOn[dep]
	return ok
}

func durationEnv(t *testing.T, s types.ServiceConfig, key string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(value(s.Environment, key))
	if err != nil {
		t.Fatalf("%s: %s: %v", s.Name, key, err)
	}
	return d
}
