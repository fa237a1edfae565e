package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
)

// tmuxPane runs one command in a detached tmux session of a tmux server of
// its own, and reads what the terminal shows.
type tmuxPane struct {
	t      *testing.T
	tmux   string
	socket string
	target string
}

func requireTmux(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("install tmux: apt-get install tmux")
		}
		t.Fatalf("tmux is needed for the terminal test: apt-get install tmux (%v)", err)
	}
	return p
}

// startPane starts cmd (a shell command line) in a new 200x50 terminal. The
// shell prints "EXIT=<code>" when the command ends and keeps the pane open.
func startPane(t *testing.T, tmux, name, cmd string) *tmuxPane {
	t.Helper()
	dir, err := os.MkdirTemp("", "tmux")
	if err != nil {
		t.Fatal(err)
	}
	p := &tmuxPane{t: t, tmux: tmux, socket: filepath.Join(dir, "s"), target: name}
	t.Cleanup(func() {
		_ = exec.Command(tmux, "-S", p.socket, "kill-server").Run()
		os.RemoveAll(dir)
	})
	// The shell traps SIGINT (its child still gets the default), so that
	// Ctrl-C reaches only the command and the shell lives on to report.
	line := `trap : INT; ` + cmd + `; echo "EXIT=$?"; sleep 600`
	p.run("new-session", "-d", "-s", name, "-x", "200", "-y", "50", "sh", "-c", line)
	return p
}

func (p *tmuxPane) run(args ...string) string {
	p.t.Helper()
	cmd := exec.Command(p.tmux, append([]string{"-S", p.socket, "-f", "/dev/null"}, args...)...)
	cmd.Env = append(os.Environ(), "TERM=xterm-256color")
	out, err := cmd.CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// screen returns the whole pane, scrollback included, wrapped lines joined.
func (p *tmuxPane) screen() string {
	return p.run("capture-pane", "-p", "-J", "-S", "-", "-t", p.target)
}

// typeLine types text and presses Enter.
func (p *tmuxPane) typeLine(text string) {
	p.t.Helper()
	p.run("send-keys", "-t", p.target, "-l", text)
	p.run("send-keys", "-t", p.target, "Enter")
}

func (p *tmuxPane) keys(keys ...string) {
	p.t.Helper()
	p.run(append([]string{"send-keys", "-t", p.target}, keys...)...)
}

// waitFor polls the pane every 100ms until cond holds for what it shows.
func (p *tmuxPane) waitFor(ctx context.Context, what string, cond func(screen string) bool) string {
	p.t.Helper()
	p.t.Logf("waiting for %s", what)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		s := p.screen()
		if cond(s) {
			return s
		}
		select {
		case <-ctx.Done():
			p.t.Fatalf("waiting for %s: %v; the terminal shows:\n%s", what, ctx.Err(), s)
		case <-tick.C:
		}
	}
}

func (p *tmuxPane) waitText(ctx context.Context, text string, n int) string {
	p.t.Helper()
	return p.waitFor(ctx, fmt.Sprintf("%d× %q", n, text), func(s string) bool { return strings.Count(s, text) >= n })
}

// prompts counts the "> " prompts the pane shows.
func prompts(screen string) int {
	n := 0
	for _, l := range strings.Split(screen, "\n") {
		if strings.HasPrefix(l, ">") {
			n++
		}
	}
	return n
}

// TestChatInTerminal drives `betcode chat` through a real terminal (tmux)
// against a real agent and the real Claude Code CLI: a permission prompt
// answered y, two questions answered by number, the todo list, Ctrl-C to
// cancel a turn and Ctrl-D / a second Ctrl-C to exit.
func TestChatInTerminal(t *testing.T) {
	tmux := requireTmux(t)
	bin := testenv.Binaries(t).Client
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	dir := agent.ProjectDir(t)
	chat := fmt.Sprintf("%s --agent unix://%s chat --cwd %s", bin, agent.Opts.Socket, dir)
	ctx := testenv.Ctx(t, 3*time.Minute)

	p := startPane(t, tmux, "chat", chat)
	p.waitFor(ctx, "the first prompt", func(s string) bool { return prompts(s) >= 1 })

	// A permission prompt, answered y.
	p.typeLine("please RUNTOOL")
	s := p.waitText(ctx, "allow? [y]es once / [a]lways this session / [n]o (n: reason)", 1)
	if !strings.Contains(s, "? Claude wants to use Bash: touch created-by-tool.txt && echo done") || !strings.Contains(s, "Create a file") {
		t.Fatalf("the prompt does not show the tool call:\n%s", s)
	}
	p.typeLine("y")
	p.waitText(ctx, "Tool result received: done", 1)
	if _, err := os.Stat(filepath.Join(dir, "created-by-tool.txt")); err != nil {
		t.Fatalf("the allowed tool did not run: %v", err)
	}
	p.waitFor(ctx, "the prompt after the turn", func(s string) bool { return prompts(s) >= 2 })

	// Two questions: one option, then two of a multi-select.
	p.typeLine("ASK")
	s = p.waitText(ctx, "number, or your own answer:", 1)
	if !strings.Contains(s, "? Which database should we use?\n  1. Postgres — Relational, robust\n  2. SQLite — Embedded, simple") {
		t.Fatalf("the first question is not shown with numbered options:\n%s", s)
	}
	p.typeLine("1")
	p.waitText(ctx, "numbers separated by commas, or your own answer:", 1)
	p.typeLine("1,2")
	p.waitText(ctx, "Tool result received", 2)
	p.waitFor(ctx, "the prompt after the questions", func(s string) bool { return prompts(s) >= 3 })
	s = p.screen()
	if !strings.Contains(s, `"Postgres"`) || !strings.Contains(s, `"Auth, Search"`) {
		t.Fatalf("Claude did not get the answers Postgres and Auth, Search:\n%s", s)
	}

	// The todo list.
	p.typeLine("TODO")
	p.waitText(ctx, "☰ todos 1/3 done", 1)
	p.waitFor(ctx, "the prompt after the todos", func(s string) bool { return prompts(s) >= 4 })
	s = p.screen()
	for _, want := range []string{"☑ Write the parser", "◐ Adding tests", "☐ Update docs"} {
		if !strings.Contains(s, want) {
			t.Fatalf("the todo list lacks %q:\n%s", want, s)
		}
	}

	// Ctrl-C cancels the turn, and the chat goes on.
	p.typeLine("SLOW")
	p.waitText(ctx, "w1 ", 1)
	p.keys("C-c")
	p.waitText(ctx, "[cancelling the turn; Ctrl-C again to quit]", 1)
	p.waitFor(ctx, "the prompt after the cancelled turn", func(s string) bool { return prompts(s) >= 5 })
	if strings.Contains(p.screen(), "EXIT=") {
		t.Fatalf("one Ctrl-C ended the chat:\n%s", p.screen())
	}

	// Ctrl-D exits.
	p.keys("C-d")
	s = p.waitText(ctx, "EXIT=", 1)
	if !strings.Contains(s, "EXIT=0") {
		t.Fatalf("Ctrl-D: the chat did not exit with 0:\n%s", s)
	}

	// A second Ctrl-C during a turn exits.
	p2 := startPane(t, tmux, "chat2", chat)
	p2.waitFor(ctx, "the first prompt", func(s string) bool { return prompts(s) >= 1 })
	p2.typeLine("SLOW")
	p2.waitText(ctx, "w1 ", 1)
	p2.keys("C-c")
	p2.waitText(ctx, "Ctrl-C again to quit", 1)
	p2.keys("C-c")
	s = p2.waitText(ctx, "EXIT=", 1)
	if !strings.Contains(s, "EXIT=0") {
		t.Fatalf("second Ctrl-C: the chat did not exit with 0:\n%s", s)
	}
}

// TestChatWithoutTerminal runs one-prompt chats with no terminal: --yes-to
// pre-approves, what it does not match is denied, questions get their first
// option.
func TestChatWithoutTerminal(t *testing.T) {
	bin := testenv.Binaries(t).Client
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	dir := agent.ProjectDir(t)
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--agent", "unix://" + agent.Opts.Socket, "chat", "--cwd", dir}, args...)...)
		out, err := cmd.CombinedOutput() // stdin is /dev/null
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}

	out, code := run("--yes-to", "Bash(touch *)", "--yes-to", "Bash(echo *)", "please RUNTOOL")
	if code != 0 || !strings.Contains(out, "yes (once), by --yes-to Bash(") || !strings.Contains(out, "Tool result received: done") {
		t.Fatalf("--yes-to: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "created-by-tool.txt")); err != nil {
		t.Fatalf("the pre-approved tool did not run: %v", err)
	}

	out, code = run("--yes-to", "Bash(touch *)", "please RUNTOOL")
	if code != 0 || !strings.Contains(out, "denied: "+noTerminalReason) || strings.Contains(out, "by --yes-to") || strings.Contains(out, "allow?") {
		t.Fatalf("unmatched permission: exit %d\n%s", code, out)
	}

	out, code = run("ASK")
	if code != 0 || !strings.Contains(out, `no terminal to answer: chose "Postgres"`) || !strings.Contains(out, `no terminal to answer: chose "Auth"`) ||
		!strings.Contains(out, `"Which features do you want?"="Auth"`) || strings.Contains(out, "your own answer") {
		t.Fatalf("questions: exit %d\n%s", code, out)
	}

	if out, code = run("--yes-to", "Bash(oops", "hi"); code != 5 || !strings.Contains(out, "--yes-to") {
		t.Fatalf("bad --yes-to: exit %d, want 5\n%s", code, out)
	}
}
