package e2e

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/shared/authtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/claudecli"
)

// admin runs `betcode-relay admin` against w's store and returns stdout.
func (w *world) admin(t *testing.T, args ...string) string {
	t.Helper()
	args = append([]string{"admin", "--data-dir", w.dataDir}, args...)
	if w.dbURL != "" {
		args = append(args, "--database-url", w.dbURL)
	}
	out, err := exec.Command(bin(t, "betcode-relay"), args...).Output()
	if err != nil {
		t.Fatalf("betcode-relay %s: %v\n%s", strings.Join(args, " "), err, stderrOf(err))
	}
	return string(out)
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// enroll runs `betcode-agent enroll` and returns its combined output.
func (w *world) enroll(t *testing.T, dataDir, token string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin(t, "betcode-agent"), "enroll", "--relay", w.addr, "--relay-ca", filepath.Join(w.pki, pki.CACertFile),
		"--name", "laptop", "--data-dir", dataDir)
	cmd.Env = append(os.Environ(), "BETCODE_JOIN_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func certSerial(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.Text(16)
}

// enrollWorld is a world whose relay holds its CA key and signs 20-second
// certificates (so that renewal is due at once).
func enrollWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, pki: t.TempDir(), dataDir: t.TempDir()}
	w.extraArgs = []string{"--ca-key", filepath.Join(w.pki, pki.CAKeyFile), "--machine-cert-lifetime", "20s"}
	return newWorldOf(t, w)
}

// TestEnrollWithJoinTokenAndRenew: a team admin's join token enrolls one
// machine, which the team's members then reach; the token is refused a
// second time, an expired one always; the machine renews its short-lived
// certificate over its live tunnel without dropping it.
func TestEnrollWithJoinTokenAndRenew(t *testing.T) {
	w := enrollWorld(t)
	ctx := ctxT(t, 120*time.Second)
	w.userToken("carol")
	w.admin(t, "team", "create", "eng", "--owner", "carol")
	join := strings.TrimSpace(w.admin(t, "enroll-token", "create", "--team", "eng", "--ttl", "10m"))
	if authtoken.Check(authtoken.Join, join) != nil {
		t.Fatalf("enroll-token create printed %q", join)
	}

	// Enroll: the machine belongs to the team.
	data := t.TempDir()
	out, err := w.enroll(t, data, join)
	if err != nil {
		t.Fatalf("enroll: %v\n%s", err, out)
	}
	id := regexp.MustCompile(`machine (m-[a-z2-7]+)`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("enroll said %q", out)
	}
	if strings.Contains(out, join) {
		t.Fatal("enroll printed the join token")
	}
	m, err := w.store().GetMachine(ctx, id[1])
	if err != nil || m.TeamID != "eng" {
		t.Fatalf("enrolled machine = %+v, %v; want team eng", m, err)
	}
	key, err := os.Stat(filepath.Join(data, "relay", "machine.key"))
	if err != nil || key.Mode().Perm() != 0o600 {
		t.Fatalf("machine key: %v, %v; want mode 0600", key, err)
	}

	// The same join token again, and an expired one: refused, nothing
	// enrolled.
	if out, err := w.enroll(t, t.TempDir(), join); err == nil || !strings.Contains(out, "already used") {
		t.Fatalf("second use of the join token: %v\n%s", err, out)
	}
	old, err := authtoken.New(authtoken.Join)
	if err != nil {
		t.Fatal(err)
	}
	h := authtoken.Hash(old)
	if err := w.store().CreateEnrollToken(ctx, store.EnrollToken{ID: authtoken.ID(h), Hash: h, TeamID: "eng", UserID: "carol",
		ExpiresAt: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if out, err := w.enroll(t, t.TempDir(), old); err == nil || !strings.Contains(out, "expired") {
		t.Fatalf("expired join token: %v\n%s", err, out)
	}
	if out, err := w.enroll(t, t.TempDir(), "bcj_nonsense"); err == nil || !strings.Contains(out, "malformed") {
		t.Fatalf("malformed join token: %v\n%s", err, out)
	}
	all, err := w.store().AllMachines(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("machines after the refusals = %d, %v; want 1", len(all), err)
	}

	// Serve from the enrollment: the tunnel comes up and the 20-second
	// certificate is renewed over it (a third of its life is left at
	// once), without the tunnel going down.
	before := certSerial(t, filepath.Join(data, "relay", "machine.crt"))
	a := w.newAgent(id[1])
	claude := claudecli.Require(t)
	env := append([]string{"HOME=" + a.home}, claudecli.Env(a.home, w.api.URL())...)
	a.proc = start(t, "agent "+a.id, env, bin(t, "betcode-agent"), "serve", "--listen", "unix://"+a.sock,
		"--data-dir", data, "--claude-bin", claude, "--cert-renew-check", "1s", "--log-level", "debug", "--relay-e2e", "optional")
	a.proc.waitLine(t, `relay link up`, 60*time.Second)
	a.proc.waitLine(t, `relay link: certificate renewed|relay link down`, 30*time.Second)
	if strings.Contains(a.proc.Log(), "relay link down") {
		t.Fatalf("the tunnel went down around the renewal:\n%s", a.proc.Log())
	}
	after := certSerial(t, filepath.Join(data, "relay", "machine.crt"))
	if after == before {
		t.Fatal("the certificate file was not replaced")
	}

	// carol (team member) reaches the machine; alice does not.
	carol := w.dial(w.addr, w.userToken("carol"))
	if _, err := pb.NewAgentServiceClient(carol).ListSessions(onMachine(ctx, id[1]), &pb.ListSessionsRequest{}); err != nil {
		t.Fatalf("carol on the team's machine: %v", err)
	}
	_, err = pb.NewAgentServiceClient(w.client()).ListSessions(onMachine(ctx, id[1]), &pb.ListSessionsRequest{})
	wantCode(t, "alice on the team's machine", err, codes.NotFound, `no machine "`+id[1]+`"`)

	// The renewed certificate carries the machine through a restart.
	a.proc.kill()
	a.proc = start(t, "agent "+a.id, env, bin(t, "betcode-agent"), "serve", "--listen", "unix://"+a.sock,
		"--data-dir", data, "--claude-bin", claude, "--log-level", "debug", "--relay-e2e", "optional")
	a.proc.waitLine(t, `relay link up`, 60*time.Second)

	events := w.admin(t, "audit", "--json")
	for _, action := range []string{"machine.enrolled", "enroll.refused", "cert.renewed", "enroll_token.created"} {
		if !strings.Contains(events, `"`+action+`"`) {
			t.Errorf("audit log lacks %s:\n%s", action, events)
		}
	}
	if strings.Contains(events, join) || strings.Contains(events, old) {
		t.Fatal("the audit log holds a join token")
	}
}
