// Package testenv runs the agent the way users do, for end-to-end tests:
// it builds the real binaries once per test process, starts the project's
// fake Anthropic API and the pinned real Claude Code CLI (or the fake CLI for
// the cases the real one cannot show), and starts and kills agent processes.
package testenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/claudecli"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// Bins are the built binaries.
type Bins struct {
	Agent, Client, FakeClaude string
}

var (
	buildOnce sync.Once
	bins      Bins
	buildErr  error
	buildDir  string
)

// Main wraps testing.M.Run and removes the built binaries afterwards.
func Main(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Binaries builds the agent (with -race), the client and the fake CLI once.
func Binaries(t testing.TB) Bins {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "betcode-bin-")
		if buildErr != nil {
			return
		}
		bins = Bins{
			Agent:      filepath.Join(buildDir, "betcode-agent"),
			Client:     filepath.Join(buildDir, "betcode"),
			FakeClaude: filepath.Join(buildDir, "fakeclaude"),
		}
		for _, b := range []struct {
			out, pkg string
			race     bool
		}{
			{bins.Agent, "./cmd/betcode-agent", true},
			{bins.Client, "./cmd/betcode", false},
			{bins.FakeClaude, "./internal/fakeclaude", false},
		} {
			args := []string{"build", "-o", b.out}
			if b.race {
				args = append(args, "-race")
			}
			cmd := exec.Command("go", append(args, b.pkg)...)
			cmd.Dir = moduleRoot()
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bins
}

// FakeAPI starts the fake Messages API for the test.
func FakeAPI(t testing.TB) *fakeapi.Server {
	t.Helper()
	srv, err := fakeapi.Start(fakeapi.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// RealClaude returns the pinned real CLI; the test fails (never skips) with
// install instructions when it is missing.
func RealClaude(t testing.TB) string { return claudecli.Require(t) }

// AgentOptions configure StartAgent.
type AgentOptions struct {
	Bin       string // the betcode-agent binary; default: Binaries' (built with -race)
	ClaudeBin string // default: the real CLI
	APIURL    string // fake API URL for the CLI
	DataDir   string // default: a new temp dir (reuse it to restart an agent)
	Home      string // HOME for the agent and its CLIs; default: a new temp dir
	Socket    string // default: a new short temp path
	Args      []string
	Env       []string
}

// Agent is a running agent process.
type Agent struct {
	Opts   AgentOptions
	Cmd    *exec.Cmd
	Conn   *grpc.ClientConn
	API    pb.AgentServiceClient
	stderr *lockedBuffer
	exited chan struct{}
	err    error
}

// StartAgent starts betcode-agent and waits until it serves.
func StartAgent(t testing.TB, o AgentOptions) *Agent {
	t.Helper()
	if o.Bin == "" {
		o.Bin = Binaries(t).Agent
	}
	if o.ClaudeBin == "" {
		o.ClaudeBin = RealClaude(t)
	}
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	if o.Home == "" {
		o.Home = t.TempDir()
	}
	if o.Socket == "" {
		dir, err := os.MkdirTemp("", "bc")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		o.Socket = filepath.Join(dir, "agent.sock")
	}
	// No drain by default: cleanups stop agents with turns still running
	// (a test of the drain sets --drain-timeout in Args; the last one wins).
	args := append([]string{"serve", "--listen", "unix://" + o.Socket, "--data-dir", o.DataDir,
		"--claude-bin", o.ClaudeBin, "--log-level", "debug", "--drain-timeout", "0"}, o.Args...)
	cmd := exec.Command(o.Bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+o.Home)
	if o.APIURL != "" {
		cmd.Env = append(cmd.Env, claudecli.Env(o.Home, o.APIURL)...)
	}
	cmd.Env = append(cmd.Env, o.Env...)
	a := &Agent{Opts: o, Cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stderr = io.MultiWriter(a.stderr, pw)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		a.err = cmd.Wait()
		pw.Close()
		close(a.exited)
	}()
	t.Cleanup(func() {
		// Graceful, so that the agent stops its CLIs before the test's
		// directories are removed.
		_ = a.Terminate(15 * time.Second)
		if t.Failed() {
			t.Logf("agent log:\n%s", a.Log())
		}
	})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), "agent serving") {
				close(ready)
				signalled = true
			}
		}
	}()
	select {
	case <-ready:
	case <-a.exited:
		t.Fatalf("agent exited before serving: %v\n%s", a.err, a.Log())
	case <-time.After(60 * time.Second):
		t.Fatalf("agent did not start within 60s:\n%s", a.Log())
	}
	conn, err := grpc.NewClient("unix://"+o.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	a.Conn = conn
	a.API = pb.NewAgentServiceClient(conn)
	return a
}

// ProjectDir makes a new working directory for a session. It lives in the
// agent's home, which is removed only after the agent has stopped.
func (a *Agent) ProjectDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp(a.Opts.Home, "project-")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Log returns what the agent logged so far.
func (a *Agent) Log() string { return a.stderr.String() }

// Kill SIGKILLs the agent and waits for it.
func (a *Agent) Kill() {
	_ = a.Cmd.Process.Signal(syscall.SIGKILL)
	<-a.exited
}

// Terminate sends SIGTERM and waits up to d; it returns the exit error.
func (a *Agent) Terminate(d time.Duration) error {
	select {
	case <-a.exited:
		return a.err
	default:
	}
	_ = a.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
		return a.err
	case <-time.After(d):
		a.Kill()
		return fmt.Errorf("agent did not exit within %s of SIGTERM", d)
	}
}

// Signal sends sig to the agent without waiting.
func (a *Agent) Signal(sig os.Signal) error { return a.Cmd.Process.Signal(sig) }

// WaitLog waits up to d until the agent has logged a line containing s.
func (a *Agent) WaitLog(s string, d time.Duration) error {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		changed := a.stderr.changed()
		if strings.Contains(a.Log(), s) {
			return nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return fmt.Errorf("agent did not log %q within %s", s, d)
		}
	}
}

// Exited is closed when the process has exited.
func (a *Agent) Exited() <-chan struct{} { return a.exited }

// Restart starts a new agent on the same data dir, home and socket.
func (a *Agent) Restart(t testing.TB) *Agent {
	t.Helper()
	a.Kill()
	return StartAgent(t, a.Opts)
}

// Ctx returns a context for one test step.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

type lockedBuffer struct {
	mu   sync.Mutex
	b    strings.Builder
	wake chan struct{} // closed at the next Write
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
	return l.b.Write(p)
}

// changed returns a channel closed at the next Write.
func (l *lockedBuffer) changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	return l.wake
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
