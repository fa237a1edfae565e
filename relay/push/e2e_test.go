package push

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/betcode-dev/betcode/relay/internal/pushtest"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/tunnelsvc"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/claudecli"
	"github.com/betcode-dev/betcode/shared/fakeapi"
	"github.com/betcode-dev/betcode/shared/mtls"
)

var (
	agentOnce sync.Once
	agentBin  string
	agentErr  error
)

// buildAgent builds betcode-agent once per test process.
func buildAgent(t *testing.T) string {
	t.Helper()
	agentOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		dir, err := os.MkdirTemp("", "betcode-push-e2e-")
		if err != nil {
			agentErr = err
			return
		}
		agentBin = filepath.Join(dir, "betcode-agent")
		cmd := exec.Command("go", "build", "-o", agentBin, "./cmd/betcode-agent")
		cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..", "agent")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentErr = fmt.Errorf("build betcode-agent: %v\n%s", err, out)
		}
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agentBin
}

// TestEndToEnd runs a real agent (and the real Claude CLI against the fake
// model API) connected over mTLS to the relay's tunnel service, with the
// push service watching it as the relay wires it (OnOnline): a session's
// permission prompt becomes a notification the loopback push service
// decrypts, whose requestId answers the prompt, which withdraws it (a
// "resolved" message with its tag and topic), and the turn's end is
// notified too.
func TestEndToEnd(t *testing.T) {
	claude := claudecli.Require(t)
	agentPath := buildAgent(t)
	dir := t.TempDir()
	if _, err := pki.Init(dir, []string{"localhost", "127.0.0.1"}, pki.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.IssueMachine(dir, "m1", pki.Options{Owner: "user:alice", Force: true}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "relay.db")
	st := openSQLite(t, path)
	must(t, st.CreateUser(t.Context(), store.User{ID: "alice"}))
	noServiceGoroutines(t)
	e := &env{st: st, auth: newAuth(t, st), push: pushtest.New(t)}
	e.svc = e.service(t, st, "mailto:ops@example.com")
	e.subscribe(t, "alice")

	// The relay's tunnel service, wired as relay/server wires it.
	tunnels := registry.New()
	online := make(chan *registry.Tunnel, 4)
	tlsCfg, err := mtls.ServerConfig(filepath.Join(dir, pki.RelayCertFile), filepath.Join(dir, pki.RelayKeyFile), filepath.Join(dir, pki.CACertFile), mtls.VerifyClientCertIfGiven)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsCfg)))
	pb.RegisterTunnelServiceServer(gs, &tunnelsvc.Service{
		Store: st, Registry: tunnels, Log: testLog(t), HeartbeatInterval: time.Second,
		OnOnline: func(_ context.Context, tun *registry.Tunnel) {
			e.svc.WatchTunnel(tun)
			online <- tun
		},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(ln)
	}()
	t.Cleanup(func() { tunnels.CloseAll(); gs.Stop(); <-served })

	api, err := fakeapi.Start(fakeapi.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	home := t.TempDir()
	project := filepath.Join(home, "project")
	must(t, os.MkdirAll(project, 0o755))
	sockDir, err := os.MkdirTemp("", "bcp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	cmd := exec.Command(agentPath, "serve", "--listen", "unix://"+filepath.Join(sockDir, "a.sock"),
		"--data-dir", t.TempDir(), "--claude-bin", claude, "--relay", ln.Addr().String(), "--relay-ca", filepath.Join(dir, pki.CACertFile),
		"--machine-cert", filepath.Join(dir, pki.MachineCertFile("m1")), "--machine-key", filepath.Join(dir, pki.MachineKeyFile("m1")),
		"--machine-name", "laptop", "--log-level", "debug", "--drain-timeout", "0",
		"--http-listen=",          // no web app: its default port may be taken
		"--relay-e2e", "optional") // the relay's own watcher reads the machine's prompts
	cmd.Env = append(append(os.Environ(), "HOME="+home), claudecli.Env(home, api.URL())...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	logs := logLines(t, pr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_ = cmd.Wait()
		pw.Close()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		<-logs
	})

	var tun *registry.Tunnel
	select {
	case tun = <-online:
	case <-exited:
		t.Fatal("the agent exited before its tunnel came up")
	case <-time.After(90 * time.Second):
		t.Fatal("the agent's tunnel did not come up within 90s")
	}
	conn, err := dialTunnel(tun.Client)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	agent := pb.NewAgentServiceClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-betcode-user", "alice")
	started, err := agent.StartSession(ctx, &pb.StartSessionRequest{
		WorkingDirectory: project, Name: "e2e", Message: &pb.UserMessage{Content: "please RUNTOOL now"},
	})
	if err != nil {
		t.Fatalf("StartSession: %v", err)
	}
	sid := started.GetSession().GetId()

	var n Notification
	m := e.push.Next(t, 2*time.Minute)
	if err := json.Unmarshal(m.Payload, &n); err != nil {
		t.Fatal(err)
	}
	if n.Type != KindPermission || n.MachineID != "m1" || n.SessionID != sid || n.RequestID == "" || n.Title != "Bash wants to run" ||
		n.Body != fakeapi.ToolCommand || n.Tag != "m1/"+sid+"/"+n.RequestID || n.URL != "/#/m/m1/s/"+sid || m.Urgency != "high" {
		t.Fatalf("notification = %s (urgency %q); want the Bash prompt of session %s", m.Payload, m.Urgency, sid)
	}
	// The notification's action: answer with its requestId, as the
	// service worker does through the web API.
	if _, err := agent.AnswerPermission(ctx, &pb.AnswerPermissionRequest{SessionId: sid, Response: &pb.PermissionResponse{
		RequestId: n.RequestID, Decision: pb.PermissionDecision_ALLOW_ONCE,
	}}); err != nil {
		t.Fatalf("AnswerPermission(%s): %v", n.RequestID, err)
	}
	// Answered: its notification is withdrawn (the relay cannot tell the
	// device that answered, so every subscription gets the resolution).
	prompt := n
	m = e.push.Next(t, 2*time.Minute)
	n = Notification{}
	if err := json.Unmarshal(m.Payload, &n); err != nil {
		t.Fatal(err)
	}
	if n.Type != KindResolved || n.Tag != prompt.Tag || n.RequestID != prompt.RequestID || m.Topic != topic(prompt.Tag) || n.Body != "" {
		t.Errorf("second notification = %s (topic %q); want the resolution of %s", m.Payload, m.Topic, prompt.Tag)
	}
	m = e.push.Next(t, 2*time.Minute)
	n = Notification{}
	if err := json.Unmarshal(m.Payload, &n); err != nil {
		t.Fatal(err)
	}
	if n.Type != KindTurnComplete || n.SessionID != sid || n.RequestID != "" {
		t.Errorf("third notification = %s; want the turn_complete of %s", m.Payload, sid)
	}
	if _, err := os.Stat(filepath.Join(project, fakeapi.ToolFile)); err != nil {
		t.Errorf("the allowed tool did not run: %v", err)
	}
}

// logLines copies the agent's warnings and errors from r to the test log;
// the channel is closed when r ends.
func logLines(t *testing.T, r io.Reader) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if line := sc.Text(); strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") || strings.Contains(line, "relay link") {
				t.Log("agent:", line)
			}
		}
	}()
	return done
}
