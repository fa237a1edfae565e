package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// errGitMissing is returned when the git binary cannot be found.
var errGitMissing = errors.New("git is not installed on this machine")

// gitError is a git command that ran and failed.
type gitError struct {
	Args   []string
	Code   int    // exit code
	Stderr string // trimmed, at most a few KiB
}

func (e *gitError) Error() string {
	msg := e.Stderr
	if msg == "" {
		msg = "exit status " + strconv.Itoa(e.Code)
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.Args, " "), msg)
}

// stderrHas reports whether err is a gitError whose message contains s.
func stderrHas(err error, s string) bool {
	var ge *gitError
	return errors.As(err, &ge) && strings.Contains(ge.Stderr, s)
}

// git runs the git binary. Inherited GIT_* variables are dropped (GIT_DIR
// or GIT_WORK_TREE from whatever started the daemon would point every call
// at another repository); the locale is C so that error messages can be
// matched; prompts and pagers are off.
type git struct {
	bin     string
	timeout time.Duration
	env     []string
}

func newGit(bin string, timeout time.Duration) *git {
	if bin == "" {
		bin = "git"
	}
	env := make([]string, 0, len(os.Environ())+4)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	env = append(env, "GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "LC_ALL=C", "GIT_ADVICE=0")
	return &git{bin: bin, timeout: timeout, env: env}
}

// globalArgs come before the subcommand of every call.
var globalArgs = []string{"--no-pager", "-c", "core.quotepath=off", "-c", "color.ui=false", "-c", "core.fsmonitor=false"}

// run runs git in dir and returns its standard output.
func (g *git) run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	path, err := exec.LookPath(g.bin)
	if err != nil {
		return nil, errGitMissing
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	full := append(append([]string{"-C", dir}, globalArgs...), args...)
	cmd := exec.CommandContext(ctx, path, full...)
	cmd.Env = g.env
	// git may start helpers of its own: kill the whole group, and do not
	// wait for a helper holding stdout after git is gone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("git %s took longer than %s: %w", args[0], g.timeout, context.DeadlineExceeded)
		}
		return nil, ctx.Err()
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 4<<10 {
			msg = msg[:4<<10]
		}
		return nil, &gitError{Args: args, Code: exit.ExitCode(), Stderr: msg}
	}
	if err != nil {
		return nil, fmt.Errorf("git %s: %w", args[0], err)
	}
	return stdout.Bytes(), nil
}

// line runs git and returns its output's first line, trimmed.
func (g *git) line(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := g.run(ctx, dir, args...)
	if err != nil {
		return "", err
	}
	s, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(s), nil
}
