package e2e

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/internal/testenv"
)

// runCLI runs the betcode client against an agent and returns its output
// and exit code.
func runCLI(t *testing.T, socket string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(testenv.Binaries(t).Client, append([]string{"--agent", "unix://" + socket}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestClientCLI(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	sock := agent.Opts.Socket
	dir := agent.ProjectDir(t)

	out, errOut, code := runCLI(t, sock, "chat", "--cwd", dir, "hello")
	if code != 0 || !strings.Contains(out, "Hello from the fake model.") || !strings.Contains(errOut, "in /") {
		t.Fatalf("chat: code %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if strings.Contains(out, "> hello") {
		t.Errorf("chat echoed the user's own message:\n%s", out)
	}
	out, errOut, code = runCLI(t, sock, "chat", "--cwd", dir, "--allow", "Bash", "please RUNTOOL")
	if code != 0 || !strings.Contains(out, "⏺ Bash(touch created-by-tool.txt") || !strings.Contains(out, "⎿ done") {
		t.Fatalf("tool chat: code %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	out, _, code = runCLI(t, sock, "sessions")
	if code != 0 || strings.Count(out, dir) != 2 {
		t.Fatalf("sessions: code %d\n%s", code, out)
	}
	id := strings.Fields(strings.Split(out, "\n")[1])[0]
	out, _, code = runCLI(t, sock, "replay", id, "--json")
	if code != 0 || !strings.Contains(out, `"sequence":"1"`) || !strings.Contains(out, "turnComplete") || !strings.Contains(out, `"userInput":{"content":"please RUNTOOL"}`) {
		t.Fatalf("replay: code %d\n%s", code, out)
	}
	// The text replay shows the prompt, then what it caused.
	out, _, code = runCLI(t, sock, "replay", id)
	prompt, tool := strings.Index(out, "> please RUNTOOL\n"), strings.Index(out, "⏺ Bash(")
	if code != 0 || prompt < 0 || tool < prompt {
		t.Fatalf("replay: code %d; want the prompt line before the tool call\n%s", code, out)
	}

	tests := []struct {
		name string
		args []string
		want int
	}{
		{"unknown session", []string{"replay", "no-such-session"}, client.ExitSessionNotFound},
		{"attach unknown session", []string{"chat", "--session", "no-such-session", "hi"}, client.ExitSessionNotFound},
		{"bad directory", []string{"chat", "--cwd", "/does/not/exist", "hi"}, client.ExitInvalidArgs},
		{"model API fails", []string{"chat", "--cwd", dir, "ERR500 please"}, client.ExitAgentError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, sock, tt.args...)
			if code != tt.want {
				t.Fatalf("exit code %d, want %d\nstderr: %s", code, tt.want, errOut)
			}
		})
	}
	t.Run("no agent", func(t *testing.T) {
		_, errOut, code := runCLI(t, t.TempDir()+"/none.sock", "sessions")
		if code != client.ExitConnection {
			t.Fatalf("exit code %d, want %d\n%s", code, client.ExitConnection, errOut)
		}
	})
}
