package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/internal/testenv"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// TestSessionCLI drives `betcode session` (SessionService) through the real
// daemon, the real betcode binary and the real Claude Code CLI: create,
// list, get, send (streaming), watch (a status change), stop, restart and
// the errors.
func TestSessionCLI(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(), Args: []string{"--allow", "Bash"}})
	sock := agent.Opts.Socket
	dir := agent.ProjectDir(t)

	// create, in text and JSON.
	out, errOut, code := runCLI(t, sock, "session", "create", "--cwd", dir, "--provider", "claude-code", "--name", "coordinator")
	if code != 0 || !strings.Contains(out, "status:") || !strings.Contains(out, "RUNNING") || !strings.Contains(out, "coordinator") {
		t.Fatalf("session create: code %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	first := fieldOf(t, out, "id")
	ms := sessionJSON(t, sock, "session", "create", "--cwd", dir, "--json")
	if ms.GetStatus() != pb.SessionStatus_SESSION_STATUS_RUNNING || ms.GetProvider() != pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE ||
		ms.GetWorkingDirectory() != dir || !strings.HasPrefix(ms.GetAgentName(), "claude-code-") || ms.GetPid() == 0 {
		t.Fatalf("session create --json: %v", ms)
	}
	id := ms.GetId()

	// list: a table with both, and one JSON object.
	out, errOut, code = runCLI(t, sock, "session", "list")
	if code != 0 || !strings.HasPrefix(out, "ID") || !strings.Contains(out, first) || !strings.Contains(out, id) || strings.Count(out, "RUNNING") != 2 {
		t.Fatalf("session list: code %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	var list pb.SessionServiceListSessionsResponse
	out, errOut, code = runCLI(t, sock, "session", "list", "--json", "--cwd", dir)
	if code != 0 || protojson.Unmarshal([]byte(out), &list) != nil || len(list.GetSessions()) != 2 {
		t.Fatalf("session list --json: code %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}

	// get.
	out, _, code = runCLI(t, sock, "session", "get", first)
	if code != 0 || fieldOf(t, out, "id") != first || fieldOf(t, out, "name") != "coordinator" || fieldOf(t, out, "provider") != "claude-code" {
		t.Fatalf("session get: code %d\n%s", code, out)
	}

	// watch, in the background: its first line (the current status) says
	// it is subscribed, then send makes the session WORKING and RUNNING
	// again, and stop ends the watch.
	watch := exec.Command(testenv.Binaries(t).Client, "--agent", "unix://"+sock, "session", "watch", id, "--json")
	wout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var werr bytes.Buffer
	watch.Stderr = &werr
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watch.Process.Kill(); _ = watch.Wait() })
	lines := bufio.NewScanner(wout)
	nextStatus := func() *pb.SessionStatusEvent {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("watch ended early: %v\nstderr: %s", lines.Err(), werr.String())
		}
		var ev pb.SessionStatusEvent
		if err := protojson.Unmarshal(lines.Bytes(), &ev); err != nil {
			t.Fatalf("watch line %q: %v", lines.Text(), err)
		}
		return &ev
	}
	if ev := nextStatus(); ev.GetNewStatus() != pb.SessionStatus_SESSION_STATUS_RUNNING || ev.GetSessionId() != id {
		t.Fatalf("first watch event %v", ev)
	}

	// send streams the activity, ending with the completion.
	out, errOut, code = runCLI(t, sock, "session", "send", id, "please", "RUNTOOL", "now")
	if code != 0 || !strings.Contains(out, "⏺ Bash(") || !strings.Contains(out, "⎿ done") || !strings.Contains(errOut, "tokens: ") {
		t.Fatalf("session send: code %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	out, errOut, code = runCLI(t, sock, "session", "send", id, "hello", "--json")
	if code != 0 {
		t.Fatalf("session send --json: code %d\n%s", code, errOut)
	}
	acts := jsonLines[pb.SessionActivityEvent](t, out)
	if len(acts) == 0 {
		t.Fatalf("session send --json printed nothing\nstderr: %s", errOut)
	}
	if last := acts[len(acts)-1]; last.GetType() != pb.ActivityType_ACTIVITY_TYPE_COMPLETION || last.GetContent() != fakeapi.HelloText || last.GetSessionId() != id {
		t.Fatalf("last activity %v", last)
	}

	// The watch saw the session work and go idle (twice).
	for _, want := range []pb.SessionStatus{pb.SessionStatus_SESSION_STATUS_WORKING, pb.SessionStatus_SESSION_STATUS_RUNNING} {
		if ev := nextStatus(); ev.GetNewStatus() != want {
			t.Fatalf("watch event %v, want %v", ev, want)
		}
	}

	// stop: STOPPED, and the watch ends after STOPPING -> STOPPED.
	ms = sessionJSON(t, sock, "session", "stop", id, "--json")
	if ms.GetStatus() != pb.SessionStatus_SESSION_STATUS_STOPPED || ms.GetEndedAt() == nil {
		t.Fatalf("session stop: %v", ms)
	}
	var tail []pb.SessionStatus
	for lines.Scan() {
		var ev pb.SessionStatusEvent
		if err := protojson.Unmarshal(lines.Bytes(), &ev); err != nil {
			t.Fatalf("watch line %q: %v", lines.Text(), err)
		}
		tail = append(tail, ev.GetNewStatus())
	}
	if err := watch.Wait(); err != nil {
		t.Fatalf("watch after the stop: %v\nstderr: %s", err, werr.String())
	}
	if n := len(tail); n == 0 || tail[n-1] != pb.SessionStatus_SESSION_STATUS_STOPPED {
		t.Fatalf("watch ended with %v, want ... STOPPED", tail)
	}
	out, _, code = runCLI(t, sock, "session", "list")
	if code != 0 || strings.Contains(out, id) {
		t.Fatalf("session list shows the stopped session: code %d\n%s", code, out)
	}
	out, _, code = runCLI(t, sock, "session", "list", "--all")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "STOPPED") {
		t.Fatalf("session list --all: code %d\n%s", code, out)
	}

	// restart with a provider_config override: the new session gets it
	// (Claude Code takes no keys, so it refuses it), then without one.
	_, errOut, code = runCLI(t, sock, "session", "restart", id, "--provider-config", "k=w")
	if code == 0 || !strings.Contains(errOut, `unknown provider_config key "k"`) {
		t.Fatalf("session restart --provider-config k=w: code %d, stderr %q; want Claude Code to refuse the key", code, errOut)
	}
	ms = sessionJSON(t, sock, "session", "restart", id, "--json")
	if ms.GetId() == id || ms.GetRestartCount() != 1 || ms.GetStatus() != pb.SessionStatus_SESSION_STATUS_RUNNING || ms.GetWorkingDirectory() != dir {
		t.Fatalf("session restart: %v", ms)
	}

	// watch without an id follows every session until Ctrl-C, then exits 0.
	all := exec.Command(testenv.Binaries(t).Client, "--agent", "unix://"+sock, "session", "watch", "--cwd", dir)
	aout, err := all.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var aerr bytes.Buffer
	all.Stderr = &aerr
	if err := all.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = all.Process.Kill(); _ = all.Wait() })
	alines := bufio.NewScanner(aout)
	if !alines.Scan() || !strings.Contains(alines.Text(), "-> RUNNING") {
		t.Fatalf("watch (all): first line %q, %v\nstderr: %s", alines.Text(), alines.Err(), aerr.String())
	}
	if err := all.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for alines.Scan() {
	}
	if err := all.Wait(); err != nil {
		t.Fatalf("watch (all) after Ctrl-C: %v, want exit 0\nstderr: %s", err, aerr.String())
	}

	tests := []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"get unknown session", []string{"session", "get", "no-such-session"}, client.ExitSessionNotFound, "BETCODE-2010"},
		{"send to unknown session", []string{"session", "send", "no-such-session", "hi"}, client.ExitSessionNotFound, "BETCODE-2010"},
		{"stop unknown session", []string{"session", "stop", "no-such-session"}, client.ExitSessionNotFound, "BETCODE-2010"},
		{"watch unknown session", []string{"session", "watch", "no-such-session"}, client.ExitSessionNotFound, "BETCODE-2010"},
		{"stop twice", []string{"session", "stop", id}, client.ExitAgentError, "BETCODE-2020"},
		{"send to a stopped session", []string{"session", "send", id, "hi"}, client.ExitAgentError, "BETCODE-2011"},
		{"missing project", []string{"session", "create", "--cwd", "/does/not/exist"}, client.ExitInvalidArgs, "BETCODE-2001"},
		{"unsupported provider", []string{"session", "create", "--cwd", dir, "--provider", "openclaw"}, client.ExitInvalidArgs, "BETCODE-2002"},
		{"ACP agent not configured", []string{"session", "create", "--cwd", dir, "--provider", "acp", "--provider-config", "agent=gemini"}, client.ExitConnection, "BETCODE-2030"},
		{"unknown provider name", []string{"session", "create", "--cwd", dir, "--provider", "nope"}, client.ExitInvalidArgs, "unknown provider"},
		{"bad provider config", []string{"session", "create", "--cwd", dir, "--provider-config", "novalue"}, client.ExitInvalidArgs, "KEY=VALUE"},
		{"provider config the provider refuses", []string{"session", "create", "--cwd", dir, "--provider-config", "k=v"}, anyFailure, `unknown provider_config key "k"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, sock, tt.args...)
			if (tt.code == anyFailure && code == 0) || (tt.code != anyFailure && code != tt.code) || !strings.Contains(errOut, tt.contains) {
				t.Fatalf("exit code %d, want %d; stderr %q, want it to contain %q", code, tt.code, errOut, tt.contains)
			}
		})
	}
}

// anyFailure accepts any non-zero exit code.
const anyFailure = -1

// sessionJSON runs a command printing one ManagedSession as JSON.
func sessionJSON(t *testing.T, sock string, args ...string) *pb.ManagedSession {
	t.Helper()
	out, errOut, code := runCLI(t, sock, args...)
	if code != 0 {
		t.Fatalf("%s: code %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	var ms pb.ManagedSession
	if err := protojson.Unmarshal([]byte(out), &ms); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return &ms
}

// jsonLines decodes one message per line.
func jsonLines[T any, P interface {
	*T
	proto.Message
}](t *testing.T, out string) []*T {
	t.Helper()
	var list []*T
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("not one JSON object per line: %q", line)
		}
		m := P(new(T))
		if err := protojson.Unmarshal([]byte(line), m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		list = append(list, (*T)(m))
	}
	return list
}

// fieldOf is the value of a "key: value" line of `session get` output.
func fieldOf(t *testing.T, out, key string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %q in\n%s", key, out)
	return ""
}
