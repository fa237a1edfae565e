package e2e

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/admin"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/server"
)

// bootstrapRelay is a relay process started for the bootstrap tests, with
// its stdout (where the first administrator's token goes) kept apart from
// its log (stderr).
type bootstrapRelay struct {
	p      *proc
	stdout *lockedBuffer
	addr   string
}

func startBootstrapRelay(t *testing.T, name, pkiDir, dataDir, dbURL string, extra ...string) *bootstrapRelay {
	t.Helper()
	addr := freePort(t)
	args := serveArgs(pkiDir, addr, dataDir)
	if dbURL != "" {
		args = append(args, "--database-url", dbURL, "--advertise-addr", addr)
	}
	cmd := exec.Command(bin(t, "betcode-relay"), append(args, extra...)...)
	cmd.Env = os.Environ()
	r := &bootstrapRelay{stdout: &lockedBuffer{}, addr: addr}
	cmd.Stdout = r.stdout
	r.p = startCmd(t, name, cmd)
	return r
}

var printedToken = regexp.MustCompile(`bct_[0-9A-Za-z]+`)

// TestBootstrapAdminPrintedOnce is `docker compose up` on a fresh
// database, with two replicas starting at once: exactly one of them
// creates the first administrator and prints its token, once, to stdout
// (never to the log); the token signs in with `betcode login`; a restart
// prints nothing.
func TestBootstrapAdminPrintedOnce(t *testing.T) {
	dbURL := pgURL(t)
	pkiDir := t.TempDir()
	if _, err := pki.Init(pkiDir, []string{"localhost", "127.0.0.1"}, pki.Options{}); err != nil {
		t.Fatal(err)
	}
	relays := []*bootstrapRelay{
		startBootstrapRelay(t, "relay A", pkiDir, t.TempDir(), dbURL),
		startBootstrapRelay(t, "relay B", pkiDir, t.TempDir(), dbURL),
	}
	for _, r := range relays {
		r.p.waitLine(t, `relay serving`, 90*time.Second)
	}

	var tokens []string
	var printer *bootstrapRelay
	for _, r := range relays {
		if found := printedToken.FindAllString(r.stdout.String(), -1); len(found) > 0 {
			tokens = append(tokens, found...)
			printer = r
		}
		if printedToken.MatchString(r.p.Log()) {
			t.Errorf("%s logged a token:\n%s", r.p.name, r.p.Log())
		}
	}
	if len(tokens) != 1 {
		t.Fatalf("%d tokens printed by two replicas starting together, want exactly 1: %q\nA: %s\nB: %s",
			len(tokens), tokens, relays[0].stdout.String(), relays[1].stdout.String())
	}
	out := printer.stdout.String()
	for _, want := range []string{`relay administrator "admin"`, "betcode login --relay", "not printed again", "--bootstrap-admin=false"} {
		if !strings.Contains(out, want) {
			t.Errorf("the sign-in lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(printer.p.Log(), "created the first administrator") {
		t.Errorf("%s's log does not say it created the first administrator:\n%s", printer.p.name, printer.p.Log())
	}

	// The printed token signs in, through either replica.
	for _, r := range relays {
		login := exec.Command(bin(t, "betcode"), "login", "--relay", r.addr, "--relay-ca", filepath.Join(pkiDir, pki.CACertFile))
		login.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "BETCODE_TOKEN=")
		login.Stdin = strings.NewReader(tokens[0] + "\n")
		got, err := login.CombinedOutput()
		if err != nil || !strings.Contains(string(got), "as admin") {
			t.Fatalf("betcode login --relay %s with the printed token: %v\n%s", r.addr, err, got)
		}
	}

	// The store holds one administrator and one token, by hash only.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := server.OpenStore(ctx, dbURL, t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	users, err := st.ListUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 1 || users[0].ID != "admin" || !users[0].Admin {
		t.Fatalf("users %+v, want the one administrator admin", users)
	}
	toks, err := st.ListTokens(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 1 || toks[0].Name != admin.BootstrapTokenName {
		t.Fatalf("admin's tokens %+v, want the one %q", toks, admin.BootstrapTokenName)
	}

	// Restarted, neither replica prints anything.
	for _, r := range relays {
		r.p.stop()
	}
	again := startBootstrapRelay(t, "relay A again", pkiDir, t.TempDir(), dbURL)
	again.p.waitLine(t, `relay serving`, 90*time.Second)
	if s := again.stdout.String(); s != "" {
		t.Errorf("a restarted relay printed:\n%s", s)
	}
	if strings.Contains(again.p.Log(), "created the first administrator") {
		t.Errorf("a restarted relay created an administrator:\n%s", again.p.Log())
	}
}

// TestBootstrapAdminOff: --bootstrap-admin=false leaves an empty store
// empty and prints nothing (SQLite: the flag does not depend on the store).
func TestBootstrapAdminOff(t *testing.T) {
	pkiDir, dataDir := t.TempDir(), t.TempDir()
	if _, err := pki.Init(pkiDir, []string{"localhost", "127.0.0.1"}, pki.Options{}); err != nil {
		t.Fatal(err)
	}
	r := startBootstrapRelay(t, "relay", pkiDir, dataDir, "", "--bootstrap-admin=false")
	r.p.waitLine(t, `relay serving`, 90*time.Second)
	r.p.stop()
	if s := r.stdout.String(); s != "" {
		t.Errorf("--bootstrap-admin=false printed:\n%s", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := server.OpenStore(ctx, "", dataDir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if users, err := st.ListUsers(ctx); err != nil || len(users) != 0 {
		t.Fatalf("users %+v, %v: want none with --bootstrap-admin=false", users, err)
	}
}
