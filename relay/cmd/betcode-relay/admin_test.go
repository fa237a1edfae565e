package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/server"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/shared/authtoken"
)

// adminRun runs `betcode-relay admin ARGS... --data-dir DIR` in process and
// returns its stdout and stderr.
func adminRun(t *testing.T, dir string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append(append([]string{"admin"}, args...), "--data-dir", dir))
	err = root.ExecuteContext(t.Context())
	return out.String(), errb.String(), err
}

// mustRun is adminRun failing the test on an error.
func mustRun(t *testing.T, dir string, args ...string) (stdout, stderr string) {
	t.Helper()
	out, errOut, err := adminRun(t, dir, args...)
	if err != nil {
		t.Fatalf("admin %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	return out, errOut
}

// noStoreEnv keeps the environment from pointing the commands elsewhere.
func noStoreEnv(t *testing.T) {
	t.Setenv("BETCODE_RELAY_DATABASE_URL", "")
	t.Setenv("BETCODE_RELAY_DATA_DIR", "")
}

// TestAdminWorkflow bootstraps a relay's accounts the way docs/admin.md
// does and checks every list's table and JSON.
func TestAdminWorkflow(t *testing.T) {
	noStoreEnv(t)
	dir := filepath.Join(t.TempDir(), "relay-data")

	_, stderr := mustRun(t, dir, "user", "create", "alice", "--admin", "--email", "alice@example.com")
	if !strings.Contains(stderr, "creating a new relay store") {
		t.Errorf("first user create: stderr %q, want a note about the new store", stderr)
	}
	mustRun(t, dir, "user", "create", "bob")
	mustRun(t, dir, "team", "create", "core", "--owner", "alice")
	mustRun(t, dir, "team", "add-member", "core", "bob", "--role", "admin")

	secret, stderr := mustRun(t, dir, "token", "create", "--user", "bob", "--name", "laptop", "--ttl", "48h")
	secret = strings.TrimSpace(secret)
	if err := authtoken.Check(authtoken.Client, secret); err != nil {
		t.Fatalf("stdout %q is not just a client token: %v", secret, err)
	}
	if !strings.Contains(stderr, "will not be shown again") || strings.Contains(stderr, secret) {
		t.Errorf("stderr %q: want the warning and no secret", stderr)
	}
	id := authtoken.ID(authtoken.Hash(secret))

	join, _ := mustRun(t, dir, "enroll-token", "create", "--team", "core", "--ttl", "30m")
	if err := authtoken.Check(authtoken.Join, strings.TrimSpace(join)); err != nil {
		t.Fatalf("stdout %q is not just a join token: %v", join, err)
	}

	out, _ := mustRun(t, dir, "user", "list")
	for _, want := range []string{"USER", "alice", "alice@example.com", "bob"} {
		if !strings.Contains(out, want) {
			t.Errorf("user list lacks %q:\n%s", want, out)
		}
	}
	out, _ = mustRun(t, dir, "team", "list")
	if !strings.Contains(out, "alice (owner), bob (admin)") {
		t.Errorf("team list:\n%s", out)
	}

	var toks []struct {
		ID, UserID, Name, State string
		ExpiresAt               time.Time `json:"expires_at"`
	}
	out, _ = mustRun(t, dir, "token", "list", "--user", "bob", "--json")
	if err := json.Unmarshal([]byte(out), &toks); err != nil {
		t.Fatalf("token list --json: %v\n%s", err, out)
	}
	if len(toks) != 1 || toks[0].ID != id || toks[0].State != "live" || toks[0].Name != "laptop" {
		t.Fatalf("tokens %+v, want bob's live laptop token %s", toks, id)
	}
	if d := time.Until(toks[0].ExpiresAt); d < 47*time.Hour || d > 48*time.Hour {
		t.Errorf("token expires in %v, want 48h", d)
	}
	if strings.Contains(out, secret) {
		t.Error("token list shows the secret")
	}

	// A paired device's token (a machine asks for it, TunnelService) shows
	// its scope and machine.
	st, err := server.OpenStore(t.Context(), "", dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	devHash := authtoken.Hash("bct_device")
	err = st.CreateToken(t.Context(), store.Token{ID: authtoken.ID(devHash), UserID: "bob", Name: "device:phone", Hash: devHash,
		MachineID: "m-1", Scope: store.ScopeDevice})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	var scoped []struct {
		ID, Name, Scope string
		MachineID       string `json:"machine_id"`
	}
	out, _ = mustRun(t, dir, "token", "list", "--user", "bob", "--json")
	if err := json.Unmarshal([]byte(out), &scoped); err != nil {
		t.Fatalf("token list --json: %v\n%s", err, out)
	}
	if len(scoped) != 2 || scoped[0].Scope != store.ScopeDevice || scoped[0].MachineID != "m-1" || scoped[1].Scope != "" || scoped[1].MachineID != "" {
		t.Errorf("token list --json with a device token: %+v", scoped)
	}
	if out, _ = mustRun(t, dir, "token", "list"); !strings.Contains(out, "SCOPE") || !strings.Contains(out, "device on m-1") {
		t.Errorf("token list with a device token:\n%s", out)
	}

	if out, _ = mustRun(t, dir, "token", "revoke", id); !strings.Contains(out, "revoked token "+id) {
		t.Errorf("revoke: %q", out)
	}
	out, _ = mustRun(t, dir, "token", "list")
	if !strings.Contains(out, "revoked") {
		t.Errorf("token list after revoke:\n%s", out)
	}

	out, _ = mustRun(t, dir, "machine", "list", "--json")
	if strings.TrimSpace(out) != "[]" {
		t.Errorf("machine list --json on no machines: %q, want []", out)
	}

	var evs []struct {
		ID                             int64
		At                             time.Time
		Actor, Action, Target, Outcome string
		Detail                         string
	}
	out, _ = mustRun(t, dir, "audit", "--since", "1h", "--json")
	if err := json.Unmarshal([]byte(out), &evs); err != nil {
		t.Fatalf("audit --json: %v\n%s", err, out)
	}
	var actions []string
	for _, e := range evs {
		if e.Actor != "admin-cli" || e.Outcome != "ok" {
			t.Errorf("event %+v: want admin-cli, ok", e)
		}
		actions = append(actions, e.Action)
	}
	want := []string{"user.created", "user.created", "team.created", "team.member_added", "token.created", "enroll_token.created", "token.revoked"}
	if strings.Join(actions, " ") != strings.Join(want, " ") {
		t.Errorf("audit actions %v, want %v", actions, want)
	}
	if strings.Contains(out, secret) || strings.Contains(out, strings.TrimSpace(join)) {
		t.Error("audit log carries a secret")
	}
	out, _ = mustRun(t, dir, "audit", "--user", "bob", "--limit", "2")
	if lines := strings.Count(strings.TrimSpace(out), "\n"); lines != 2 {
		t.Errorf("audit --user bob --limit 2: %d rows:\n%s", lines, out)
	}
}

// TestAdminErrors: mistakes get clear messages, without gRPC wrapping.
func TestAdminErrors(t *testing.T) {
	noStoreEnv(t)
	dir := t.TempDir()
	mustRun(t, dir, "user", "create", "alice")
	cases := []struct {
		name string
		dir  string
		args []string
		want string
	}{
		{"missing store", filepath.Join(dir, "typo"), []string{"user", "list"}, "no relay store at"},
		{"duplicate user", dir, []string{"user", "create", "alice"}, `user "alice" already exists`},
		{"bad user name", dir, []string{"user", "create", "Bob"}, "lower case"},
		{"unknown owner", dir, []string{"team", "create", "core", "--owner", "ghost"}, `user "ghost" not found`},
		{"team needs an owner", dir, []string{"team", "create", "core"}, "owner"},
		{"ttl too long", dir, []string{"token", "create", "--user", "alice", "--ttl", "9000h"}, "ttl: want at most"},
		{"enroll needs team or user", dir, []string{"enroll-token", "create"}, "team"},
		{"enroll team and user", dir, []string{"enroll-token", "create", "--team", "t", "--user", "alice"}, "none of the others"},
		{"unknown token", dir, []string{"token", "revoke", "0123456789ab"}, `token "0123456789ab" not found`},
		{"unknown machine", dir, []string{"machine", "delete", "m9"}, `machine "m9"`},
		{"bad since", dir, []string{"audit", "--since", "yesterday"}, "--since"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := adminRun(t, tc.dir, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "rpc error") {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "typo")); err == nil {
		t.Error("a failed command created a store in the mistyped data dir")
	}
}

// TestAdminEnv: BETCODE_RELAY_DATA_DIR selects the store like serve's.
func TestAdminEnv(t *testing.T) {
	noStoreEnv(t)
	dir := t.TempDir()
	mustRun(t, dir, "user", "create", "alice")
	t.Setenv("BETCODE_RELAY_DATA_DIR", dir)
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"admin", "user", "list", "--json"})
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"id": "alice"`) {
		t.Errorf("user list via BETCODE_RELAY_DATA_DIR: %s", out.String())
	}
}
