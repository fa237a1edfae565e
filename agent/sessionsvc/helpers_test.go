package sessionsvc

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/permission"
	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/claudecli"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is a Manager driving the real Claude Code CLI against the fake API,
// with a Service served over a Unix socket.
type env struct {
	m    *session.Manager
	svc  *Service
	api  pb.SessionServiceClient
	home string
}

type envOptions struct {
	claudeBin string   // default: the real CLI
	allow     []string // permission rules that allow
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	home := t.TempDir()
	bin := o.claudeBin
	if bin == "" {
		bin = testenv.RealClaude(t)
	}
	fake := testenv.FakeAPI(t)
	var rules []permission.Rule
	for _, a := range o.allow {
		r, err := permission.ParseRule(a, permission.Allow)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	eng, err := permission.New(rules, permission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := session.Open(context.Background(), session.Config{
		ClaudeBin: bin, ClaudeEnv: claudecli.Env(home, fake.URL()), Permissions: eng,
		DefaultDir: home, CancelGrace: time.Second, StopGrace: 2 * time.Second,
	}, filepath.Join(t.TempDir(), "agent.db"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(context.Background(), m, Options{StopTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(shortDir(t), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterSessionServiceServer(srv, svc)
	pb.RegisterAgentServiceServer(srv, &server.Agent{Sessions: m})
	go func() { _ = srv.Serve(ln) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		_ = m.Close(context.Background())
		svc.Close()
	})
	return &env{m: m, svc: svc, api: pb.NewSessionServiceClient(conn), home: home}
}

// shortDir is a temporary directory with a path short enough for a socket.
func shortDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "ss")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (e *env) project(t *testing.T) string {
	dir := filepath.Join(e.home, "proj-"+session.NewSessionID()[:8])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (e *env) create(t *testing.T, ctx context.Context, req *pb.CreateSessionRequest) *pb.ManagedSession {
	t.Helper()
	if req.WorkingDirectory == "" {
		req.WorkingDirectory = e.project(t)
	}
	if req.Provider == pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED {
		req.Provider = pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE
	}
	resp, err := e.api.CreateSession(ctx, req)
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return resp.GetSession()
}

// send calls SendMessage and returns every activity event.
func (e *env) send(t *testing.T, ctx context.Context, id, msg string) ([]*pb.SessionActivityEvent, error) {
	t.Helper()
	st, err := e.api.SendMessage(ctx, &pb.SendMessageRequest{SessionId: id, Message: msg})
	if err != nil {
		return nil, err
	}
	var out []*pb.SessionActivityEvent
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// wantCode fails unless err is a status with code c and BetCode code bc.
func wantCode(t *testing.T, what string, err error, c codes.Code, bc string) {
	t.Helper()
	if status.Code(err) != c || server.BetCodeCode(err) != bc {
		t.Fatalf("%s: got %v (betcode %q), want %v / %s", what, err, server.BetCodeCode(err), c, bc)
	}
}

func ctxT(t *testing.T) context.Context { return testenv.Ctx(t, 120*time.Second) }
