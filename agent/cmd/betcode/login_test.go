package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/internal/testpki"
	"github.com/betcode-dev/betcode/shared/authtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// fakeRelay is a TLS gRPC server on loopback that knows some client tokens
// and records the authorization header of every call.
type fakeRelay struct {
	pb.UnimplementedAdminServiceServer
	pb.UnimplementedMachineServiceServer
	addr, caFile string
	users        map[string]string // token -> user

	mu    sync.Mutex
	seen  []string // authorization headers, one per call ("" for none)
	calls int
}

func startRelay(t *testing.T, users map[string]string) *fakeRelay {
	t.Helper()
	return startRelayWith(t, users, nil)
}

// startRelayWith is startRelay also serving what register registers.
func startRelayWith(t *testing.T, users map[string]string, register func(*grpc.Server)) *fakeRelay {
	t.Helper()
	ca := testpki.NewCA(t)
	r := &fakeRelay{users: users, caFile: ca.WriteCA(t, t.TempDir())}
	r.addr = ca.Serve(t, func(srv *grpc.Server) {
		pb.RegisterAdminServiceServer(srv, r)
		pb.RegisterMachineServiceServer(srv, r)
		if register != nil {
			register(srv)
		}
	})
	return r
}

// auth records the call's header and returns its user.
func (r *fakeRelay) auth(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	h := strings.Join(md.Get("authorization"), ",")
	r.mu.Lock()
	r.seen = append(r.seen, h)
	r.calls++
	r.mu.Unlock()
	if h == "" {
		return "", status.Error(codes.Unauthenticated, "no client token")
	}
	user, ok := r.users[strings.TrimPrefix(h, "Bearer ")]
	if !ok {
		return "", status.Error(codes.Unauthenticated, "unknown token")
	}
	return user, nil
}

func (r *fakeRelay) lastAuth() (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 {
		return "", 0
	}
	return r.seen[len(r.seen)-1], r.calls
}

func (r *fakeRelay) WhoAmI(ctx context.Context, _ *pb.WhoAmIRequest) (*pb.WhoAmIResponse, error) {
	user, err := r.auth(ctx)
	if err != nil {
		return nil, err
	}
	return &pb.WhoAmIResponse{User: &pb.User{Id: user}, TokenId: "0a1b2c3d4e5f",
		TokenExpiresAt: timestamppb.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))}, nil
}

func (r *fakeRelay) ListMachines(ctx context.Context, _ *pb.ListMachinesRequest) (*pb.ListMachinesResponse, error) {
	if _, err := r.auth(ctx); err != nil {
		return nil, err
	}
	return &pb.ListMachinesResponse{Machines: []*pb.Machine{{Id: "m-1", Name: "laptop"}}}, nil
}

// cliEnv isolates the CLI from the developer's environment: its own config
// dir and none of the BETCODE_ variables.
func cliEnv(t *testing.T) (configDir string) {
	t.Helper()
	configDir = t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", configDir)
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "BETCODE_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	return configDir
}

// runCLI runs betcode with args and stdin; it returns stdout and stderr.
func runCLI(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return runCLIContext(ctx, stdin, args...)
}

// runCLIContext is runCLI until ctx ends.
func runCLIContext(ctx context.Context, stdin string, args ...string) (string, string, error) {
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func newToken(t *testing.T) string {
	t.Helper()
	tok, err := authtoken.New(authtoken.Client)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestLoginMachinesLogout(t *testing.T) {
	configDir := cliEnv(t)
	tok := newToken(t)
	relay := startRelay(t, map[string]string{tok: "alice"})

	out, _, err := runCLI(t, tok+"\nignored second line\n", "login", "--relay", relay.addr, "--relay-ca", relay.caFile)
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	want := "logged in to " + relay.addr + " as alice (token 0a1b2c3d4e5f, expires "
	if !strings.HasPrefix(out, want) || strings.Contains(out, tok) {
		t.Fatalf("login printed %q, want %q… without the token", out, want)
	}
	if h, _ := relay.lastAuth(); h != "Bearer "+tok {
		t.Fatalf("WhoAmI got authorization %q", h)
	}

	path := filepath.Join(configDir, "betcode", "credentials.json")
	for p, mode := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %04o, want %04o", p, fi.Mode().Perm(), mode)
		}
	}
	var stored client.Credentials
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &stored); err != nil {
		t.Fatal(err)
	}
	if stored != (client.Credentials{Relay: relay.addr, RelayCA: relay.caFile, Token: tok, User: "alice"}) {
		t.Fatalf("stored %+v", stored)
	}

	// No --relay, no --relay-ca: both come from the login.
	out, _, err = runCLI(t, "", "machines")
	if err != nil {
		t.Fatalf("machines: %v", err)
	}
	if !strings.Contains(out, "m-1") {
		t.Fatalf("machines printed %q", out)
	}
	if h, _ := relay.lastAuth(); h != "Bearer "+tok {
		t.Fatalf("machines sent authorization %q, want the stored token", h)
	}

	// BETCODE_TOKEN wins over the stored token.
	other := newToken(t)
	t.Setenv("BETCODE_TOKEN", other)
	_, _, err = runCLI(t, "", "machines")
	if h, _ := relay.lastAuth(); h != "Bearer "+other {
		t.Fatalf("with BETCODE_TOKEN, machines sent %q", h)
	}
	if client.ExitCode(err) != client.ExitPermission || !strings.Contains(err.Error(), "the relay refused the token in BETCODE_TOKEN") {
		t.Fatalf("unknown BETCODE_TOKEN: exit %d, %v; want 3 and a hint", client.ExitCode(err), err)
	}
	os.Unsetenv("BETCODE_TOKEN")

	out, _, err = runCLI(t, "", "logout")
	if err != nil || out != "logged out of "+relay.addr+" (removed "+path+")\n" {
		t.Fatalf("logout: %q, %v", out, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("credentials still there: %v", err)
	}
	out, _, err = runCLI(t, "", "logout")
	if err != nil || out != "not logged in; nothing to do\n" {
		t.Fatalf("second logout: %q, %v", out, err)
	}
}

func TestLoginRefused(t *testing.T) {
	good := newToken(t)
	unknown := newToken(t)
	join, _ := authtoken.New(authtoken.Join)
	tests := []struct {
		name     string
		stdin    string
		wantCode int
		wantErr  string
		wantCall bool // the relay is asked
	}{
		{"unknown token", unknown + "\n", client.ExitPermission, "the relay refused this token: unknown token", true},
		{"typo", good[:10] + "x" + good[11:] + "\n", client.ExitInvalidArgs, "checksum does not match", false},
		{"join token", join + "\n", client.ExitInvalidArgs, "this is a join token", false},
		{"empty stdin", "", client.ExitInvalidArgs, "no token on stdin", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			configDir := cliEnv(t)
			relay := startRelay(t, map[string]string{good: "alice"})
			_, _, err := runCLI(t, tt.stdin, "login", "--relay", relay.addr, "--relay-ca", relay.caFile)
			if client.ExitCode(err) != tt.wantCode || err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("login: exit %d, %v; want %d and %q", client.ExitCode(err), err, tt.wantCode, tt.wantErr)
			}
			if tok := strings.TrimSpace(tt.stdin); tok != "" && strings.Contains(err.Error(), tok) {
				t.Fatalf("error %q shows the token", err)
			}
			if _, calls := relay.lastAuth(); (calls > 0) != tt.wantCall {
				t.Fatalf("relay saw %d calls, want a call: %v", calls, tt.wantCall)
			}
			if _, err := os.Stat(filepath.Join(configDir, "betcode", "credentials.json")); !os.IsNotExist(err) {
				t.Fatalf("credentials written after a refused login: %v", err)
			}
		})
	}
}

// TestStoredTokenStaysWithItsRelay: the token is sent only to the relay it
// was stored for; another relay gets none, and the refusal says to log in.
func TestStoredTokenStaysWithItsRelay(t *testing.T) {
	cliEnv(t)
	tok := newToken(t)
	home := startRelay(t, map[string]string{tok: "alice"})
	other := startRelay(t, map[string]string{tok: "alice"})
	if _, _, err := runCLI(t, tok, "login", "--relay", home.addr, "--relay-ca", home.caFile); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCLI(t, "", "--relay", other.addr, "--relay-ca", other.caFile, "machines")
	if h, calls := other.lastAuth(); calls != 1 || h != "" {
		t.Fatalf("other relay got %d calls with authorization %q, want one without", calls, h)
	}
	if client.ExitCode(err) != client.ExitPermission || !strings.Contains(err.Error(), "hint: this relay needs a client token: log in with betcode login --relay "+other.addr) {
		t.Fatalf("exit %d, %v; want 3 with a login hint", client.ExitCode(err), err)
	}
}

func TestRevokedStoredTokenHint(t *testing.T) {
	cliEnv(t)
	tok := newToken(t)
	relay := startRelay(t, map[string]string{tok: "alice"})
	if _, _, err := runCLI(t, tok, "login", "--relay", relay.addr, "--relay-ca", relay.caFile); err != nil {
		t.Fatal(err)
	}
	delete(relay.users, tok) // revoked (the server reads users only in calls)
	_, _, err := runCLI(t, "", "machines")
	if client.ExitCode(err) != client.ExitPermission || !strings.Contains(err.Error(), "log in again with betcode login --relay "+relay.addr) {
		t.Fatalf("exit %d, %v; want 3 with a hint to log in again", client.ExitCode(err), err)
	}
}

func TestReadToken(t *testing.T) {
	tests := []struct {
		name, stdin, want string
		err               bool
	}{
		{"line", "bct_x\n", "bct_x", false},
		{"no newline", "bct_x", "bct_x", false},
		{"spaces and CRLF", "  bct_x \r\nnext\n", "bct_x", false},
		{"empty", "", "", true},
		{"blank line", "\n", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := newLogoutCmd()
			cmd.SetIn(strings.NewReader(tt.stdin))
			got, err := readToken(cmd)
			if got != tt.want || (err != nil) != tt.err {
				t.Fatalf("readToken = %q, %v; want %q, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}
