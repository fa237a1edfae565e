package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/relay/internal/oidctest"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/shared/authtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// TestOIDCLoginThroughARealProvider: `betcode login --oidc` against a real
// OpenID Provider on loopback, the person's part done on the provider's
// own pages as in a browser. A verified email becomes a client token of
// the user with that email (stored 0600, working through the relay, in
// the teams the groups claim names); an unverified or unknown email and a
// denial fail clearly; ID tokens for another client, expired or garbage
// are refused when sent straight to the relay; a relay without OIDC says
// so. No token reaches the relay's log.
func TestOIDCLoginThroughARealProvider(t *testing.T) {
	idp := oidctest.Start(t,
		oidctest.User{Username: "alice", Password: "alice-pw", Email: "Alice@Example.com", EmailVerified: true, Groups: []string{"eng", "Domain Users"}},
		oidctest.User{Username: "bob", Password: "bob-pw", Email: "bob@example.com", EmailVerified: false},
		oidctest.User{Username: "stranger", Password: "stranger-pw", Email: "stranger@example.com", EmailVerified: true},
	)
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), extraArgs: []string{
		"--oidc-issuer", idp.Issuer, "--oidc-client-id", oidctest.ClientID, "--oidc-groups-claim", "groups", "--oidc-token-ttl", "24h",
	}})
	ctx := ctxT(t, 180*time.Second)
	st := w.store()
	for _, u := range []store.User{{ID: "alice", Email: "alice@example.com"}, {ID: "bob", Email: "bob@example.com"}} {
		if err := st.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CreateTeam(ctx, store.Team{ID: "eng"}); err != nil {
		t.Fatal(err)
	}
	// A machine of team eng, which alice is not in until she signs in.
	cert, key := w.machineCertOf("team1", "team:eng")
	w.newAgent("team1").start(w, cert, key)
	caFile := filepath.Join(w.pki, pki.CACertFile)

	var (
		secretsMu sync.Mutex
		secrets   []string // every token and ID token seen, for the log check
	)
	keep := func(s string) {
		secretsMu.Lock()
		defer secretsMu.Unlock()
		secrets = append(secrets, s)
	}

	t.Run("logins", func(t *testing.T) {
		t.Run("alice signs in", func(t *testing.T) {
			t.Parallel()
			r := oidcLogin(t, w.addr, caFile, "alice", "alice-pw", true)
			if r.code != 0 {
				t.Fatalf("login exited %d:\n%s", r.code, r.stderr)
			}
			if !strings.HasPrefix(r.stdout, "logged in to "+w.addr+" as alice (token ") {
				t.Fatalf("login printed %q", r.stdout)
			}
			path := filepath.Join(r.configDir, "betcode", "credentials.json")
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("credentials file: %v, %v; want mode 0600", fi, err)
			}
			var creds struct {
				Relay   string `json:"relay"`
				RelayCA string `json:"relay_ca"`
				Token   string `json:"token"`
				User    string `json:"user"`
			}
			b, _ := os.ReadFile(path)
			if err := json.Unmarshal(b, &creds); err != nil {
				t.Fatal(err)
			}
			keep(creds.Token)
			if creds.Relay != w.addr || creds.User != "alice" || creds.RelayCA != caFile || authtoken.Check(authtoken.Client, creds.Token) != nil {
				t.Fatalf("credentials: relay %s (want %s), user %s, CA %s, token check %v", creds.Relay, w.addr, creds.User, creds.RelayCA, authtoken.Check(authtoken.Client, creds.Token))
			}
			tok, err := st.TokenByHash(ctx, authtoken.Hash(creds.Token))
			if err != nil || tok.UserID != "alice" || tok.Name != "oidc" {
				t.Fatalf("stored token %+v, %v", tok, err)
			}
			if d := time.Until(tok.ExpiresAt); d < 23*time.Hour || d > 24*time.Hour {
				t.Fatalf("token expires in %s; want --oidc-token-ttl 24h", d)
			}
			if !strings.Contains(r.stdout, "(token "+tok.ID+", expires ") {
				t.Fatalf("login printed %q; want token %s", r.stdout, tok.ID)
			}
			// The stored token lists, as alice, the machine of the team her
			// groups claim put her in.
			out := runBetcode(t, r.configDir, "machines")
			if !strings.Contains(out, "team1") {
				t.Fatalf("betcode machines printed %q; want team1", out)
			}
		})
		t.Run("unverified email", func(t *testing.T) {
			t.Parallel()
			r := oidcLogin(t, w.addr, caFile, "bob", "bob-pw", true)
			r.wantFailure(t, 3, "the relay refused the sign-in: the identity provider has not verified the email bob@example.com")
		})
		t.Run("unknown email", func(t *testing.T) {
			t.Parallel()
			r := oidcLogin(t, w.addr, caFile, "stranger", "stranger-pw", true)
			r.wantFailure(t, 3, "no BetCode user has the email stranger@example.com; ask an administrator to create one (betcode-relay admin user create NAME --email stranger@example.com)")
		})
		t.Run("denied", func(t *testing.T) {
			t.Parallel()
			r := oidcLogin(t, w.addr, caFile, "alice", "alice-pw", false)
			r.wantFailure(t, 3, "the sign-in was denied at the identity provider")
		})
		t.Run("hostile ID tokens", func(t *testing.T) {
			t.Parallel()
			svc := pb.NewOIDCServiceClient(w.dial(w.addr, "")) // no client token: open methods
			cfg, err := svc.GetOIDCConfig(ctx, &pb.GetOIDCConfigRequest{})
			if err != nil || !cfg.Enabled || cfg.Issuer != idp.Issuer || cfg.ClientId != oidctest.ClientID {
				t.Fatalf("GetOIDCConfig = %+v, %v", cfg, err)
			}
			// A genuine ID token, from the same provider and person, for
			// another application.
			foreign, err := idp.DeviceLogin(ctx, oidctest.OtherClientID, "alice", "alice-pw")
			if err != nil {
				t.Fatal(err)
			}
			keep(foreign)
			expired := idp.SignIDToken(t, map[string]any{"exp": time.Now().Add(-time.Minute).Unix(), "email": "alice@example.com", "email_verified": true})
			keep(expired)
			for _, tt := range []struct{ name, token, msg string }{
				{"another audience", foreign, `expected audience "betcode"`},
				{"expired", expired, "token is expired"},
				{"garbage", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", "the ID token was refused"},
			} {
				_, err := svc.ExchangeOIDCToken(ctx, &pb.ExchangeOIDCTokenRequest{IdToken: tt.token})
				wantCode(t, tt.name, err, codes.Unauthenticated, tt.msg)
			}
		})
	})

	// The audit log tells how alice's token came about (written before
	// the sign-in answered), and the five refusals (written in the
	// background, as every refusal of an unauthenticated call is).
	var created, joined bool
	refused := 0
	evs := waitAudit(t, st, 10*time.Second, func(evs []store.AuditEvent) bool {
		created, joined, refused = false, false, 0
		for _, e := range evs {
			switch e.Action {
			case "token.created":
				created = created || e.Actor == "alice" && e.Outcome == "ok" && strings.HasSuffix(e.Detail, "via OIDC from "+idp.Issuer) && e.Remote != ""
			case "team.member_added":
				joined = joined || e.Actor == "oidc" && e.Target == "alice" && strings.Contains(e.Detail, "team eng as member")
			case "oidc.refused":
				refused++
			}
		}
		return created && joined && refused >= 5
	})
	if !created || !joined || refused < 5 {
		t.Fatalf("audit log (token.created via OIDC: %v, team.member_added by oidc: %v, %d oidc.refused; want 5):\n%+v", created, joined, refused, evs)
	}
	for _, e := range evs {
		for _, s := range secrets {
			if strings.Contains(e.Detail+e.Target, s) {
				t.Fatalf("audit event %+v holds a secret", e)
			}
		}
	}
	for _, s := range secrets {
		if strings.Contains(w.relay.Log(), s[len(s)-20:]) {
			t.Fatal("a token is in the relay's log")
		}
	}

	t.Run("relay without OIDC", func(t *testing.T) {
		plain := newWorld(t, "")
		r := oidcLoginStart(t, plain.addr, filepath.Join(plain.pki, pki.CACertFile))
		r.wait(t)
		r.wantFailure(t, 5, "this relay has no OIDC sign-in; log in with a token")
		_, err := pb.NewOIDCServiceClient(plain.dial(plain.addr, "")).ExchangeOIDCToken(ctx, &pb.ExchangeOIDCTokenRequest{IdToken: "x"})
		wantCode(t, "ExchangeOIDCToken", err, codes.FailedPrecondition, "this relay has no OIDC sign-in")
	})
}

// waitAudit reads the audit log until done says it holds what the test
// waits for, or d has passed; it returns the last read.
func waitAudit(t *testing.T, st store.Store, d time.Duration, done func([]store.AuditEvent) bool) []store.AuditEvent {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		evs, err := st.ListAudit(t.Context(), store.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if done(evs) || time.Now().After(deadline) {
			return evs
		}
		<-tick.C
	}
}

// loginRun is one `betcode login --oidc` process.
type loginRun struct {
	p         *proc
	out       *lockedBuffer
	configDir string
	// After wait: the exit code, stdout and stderr.
	code           int
	stdout, stderr string
}

// oidcLoginStart starts `betcode login --oidc` with its own config
// directory.
func oidcLoginStart(t *testing.T, relay, caFile string) *loginRun {
	t.Helper()
	r := &loginRun{configDir: t.TempDir(), out: &lockedBuffer{}}
	cmd := exec.Command(bin(t, "betcode"), "login", "--oidc", "--relay", relay, "--relay-ca", caFile)
	cmd.Env = append(cleanEnv(), "XDG_CONFIG_HOME="+r.configDir)
	cmd.Stdout = r.out
	r.p = startCmd(t, "betcode login --oidc", cmd)
	return r
}

// oidcLogin runs `betcode login --oidc` and does the person's part as
// username: reads the URL and code it prints, signs in on the provider's
// pages and allows (or denies) the device.
func oidcLogin(t *testing.T, relay, caFile, username, password string, allow bool) *loginRun {
	t.Helper()
	r := oidcLoginStart(t, relay, caFile)
	m := r.p.waitLine(t, `open (\S+) and enter code (\S+)$`, 60*time.Second)
	if err := oidctest.SignIn(ctxT(t, 60*time.Second), m[1], m[2], username, password, allow); err != nil {
		t.Fatalf("sign in as %s on the provider's pages: %v", username, err)
	}
	r.wait(t)
	return r
}

// wait waits for the process to exit: polling the provider every 5 s
// (its interval), it needs one or two polls.
func (r *loginRun) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.p.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("betcode login --oidc did not finish:\n%s", r.p.Log())
	}
	r.code = r.p.cmd.ProcessState.ExitCode()
	r.stdout = r.out.String()
	r.stderr = r.p.Log()
}

func (r *loginRun) wantFailure(t *testing.T, code int, msg string) {
	t.Helper()
	if r.code != code || !strings.Contains(r.stderr, msg) {
		t.Fatalf("login exited %d, want %d with %q:\n%s", r.code, code, msg, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(r.configDir, "betcode", "credentials.json")); !os.IsNotExist(err) {
		t.Fatalf("credentials written after a failed sign-in: %v", err)
	}
}

// runBetcode runs the betcode CLI with configDir's credentials and returns
// its stdout.
func runBetcode(t *testing.T, configDir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin(t, "betcode"), args...)
	cmd.Env = append(cleanEnv(), "XDG_CONFIG_HOME="+configDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("betcode %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// cleanEnv is the environment without BETCODE_ variables (a developer's
// BETCODE_TOKEN or BETCODE_RELAY would change what the CLI does).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BETCODE_") {
			env = append(env, kv)
		}
	}
	return env
}

// lockedBuffer is a bytes.Buffer a process writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
