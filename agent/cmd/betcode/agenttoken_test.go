package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/viper"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/betcode-dev/betcode/agent/localtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// fakeAgent records the authorization header of ListSessions calls.
type fakeAgent struct {
	pb.UnimplementedAgentServiceServer
	mu   sync.Mutex
	seen []string
}

func (a *fakeAgent) ListSessions(ctx context.Context, _ *pb.ListSessionsRequest) (*pb.ListSessionsResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	a.mu.Lock()
	a.seen = append(a.seen, strings.Join(md.Get("authorization"), ","))
	a.mu.Unlock()
	return &pb.ListSessionsResponse{}, nil
}

func (a *fakeAgent) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		return "<no call>"
	}
	return a.seen[len(a.seen)-1]
}

func serveAgent(t *testing.T, l net.Listener) *fakeAgent {
	t.Helper()
	a := &fakeAgent{}
	srv := grpc.NewServer()
	pb.RegisterAgentServiceServer(srv, a)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return a
}

func TestAgentTokenSentToTCPAgents(t *testing.T) {
	cliEnv(t)
	dataDir := t.TempDir()
	fileTok, err := localtoken.LoadOrCreate(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	tcpL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcp := serveAgent(t, tcpL)
	sockDir, err := os.MkdirTemp("", "bct")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	unixL, err := net.Listen("unix", filepath.Join(sockDir, "a.sock"))
	if err != nil {
		t.Fatal(err)
	}
	unix := serveAgent(t, unixL)

	tests := []struct {
		name  string
		agent *fakeAgent
		env   map[string]string
		args  []string
		want  string
	}{
		{"tcp: token file of --agent-data-dir", tcp, nil,
			[]string{"--agent", tcpL.Addr().String(), "--agent-data-dir", dataDir}, "Bearer " + fileTok},
		{"tcp: --agent-token wins", tcp, nil,
			[]string{"--agent", tcpL.Addr().String(), "--agent-data-dir", dataDir, "--agent-token", "flagtoken"}, "Bearer flagtoken"},
		{"tcp: BETCODE_AGENT_TOKEN", tcp, map[string]string{"BETCODE_AGENT_TOKEN": "envtoken"},
			[]string{"--agent", tcpL.Addr().String(), "--agent-data-dir", dataDir}, "Bearer envtoken"},
		{"tcp: no token file, no token", tcp, nil,
			[]string{"--agent", tcpL.Addr().String(), "--agent-data-dir", t.TempDir()}, ""},
		{"unix socket: never a token", unix, nil,
			[]string{"--agent", "unix://" + unixL.Addr().String(), "--agent-data-dir", dataDir}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			if _, _, err := runCLI(t, "", append(tt.args, "sessions")...); err != nil {
				t.Fatalf("sessions: %v", err)
			}
			if got := tt.agent.last(); got != tt.want {
				t.Fatalf("agent got authorization %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAgentTokenFileStaysOnThisMachine(t *testing.T) {
	cliEnv(t)
	dataDir := t.TempDir()
	if _, err := localtoken.LoadOrCreate(dataDir); err != nil {
		t.Fatal(err)
	}
	g := &globals{v: viper.New()}
	tests := []struct {
		name, addr, flag, want string
	}{
		{"loopback IP", "127.0.0.1:7000", "", "file"},
		{"localhost", "localhost:7000", "", "file"},
		{"another host", "build.example:7000", "", ""},
		{"another host, explicit token", "build.example:7000", "explicit", "explicit"},
	}
	fileTok, _ := localtoken.Read(dataDir)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g.v.Set("agent-data-dir", dataDir)
			g.v.Set("agent-token", tt.flag)
			got, err := g.agentToken(tt.addr)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "file" {
				tt.want = fileTok
			}
			if got != tt.want {
				t.Fatalf("agentToken(%q) = %q, want %q", tt.addr, got, tt.want)
			}
		})
	}
}

// TestAgentFlagWinsOverLogin: after a login, commands go to the relay
// unless --agent (or BETCODE_AGENT) names an agent.
func TestAgentFlagWinsOverLogin(t *testing.T) {
	cliEnv(t)
	tok := newToken(t)
	relay := startRelay(t, map[string]string{tok: "alice"})
	if _, _, err := runCLI(t, tok, "login", "--relay", relay.addr, "--relay-ca", relay.caFile); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	agent := serveAgent(t, l)
	if _, _, err := runCLI(t, "", "--agent", l.Addr().String(), "--agent-data-dir", t.TempDir(), "sessions"); err != nil {
		t.Fatalf("sessions: %v", err)
	}
	if got := agent.last(); got != "" {
		t.Fatalf("the local agent got authorization %q: the relay's token leaked to it", got)
	}
	if _, calls := relay.lastAuth(); calls != 1 {
		t.Fatalf("relay saw %d calls, want only the login's", calls)
	}
}
