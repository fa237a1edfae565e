// Package gitexec runs the git binary for the agent's services (the
// workspace's read-only views, worktrees): one way to start git with an
// environment no inherited variable can bend, a timeout that kills git's
// whole process group, bounded output and stderr, and errors that say
// which command failed and why.
package gitexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/betcode-dev/betcode/agent/internal/procgroup"
)

// ErrMissing is returned when the git binary cannot be found.
var ErrMissing = errors.New("git is not installed on this machine")

// maxStderr bounds the stderr an Error keeps.
const maxStderr = 4 << 10

// Error is a git command that ran and failed.
type Error struct {
	Args   []string
	Code   int    // exit code
	Stderr string // trimmed, at most 4 KiB
}

func (e *Error) Error() string {
	msg := e.Stderr
	if msg == "" {
		msg = "exit status " + strconv.Itoa(e.Code)
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.Args, " "), msg)
}

// StderrHas reports whether err is an *Error whose stderr contains s.
func StderrHas(err error, s string) bool {
	var ge *Error
	return errors.As(err, &ge) && strings.Contains(ge.Stderr, s)
}

// Runner runs git. Inherited GIT_* variables are dropped (GIT_DIR or
// GIT_WORK_TREE from whatever started the daemon would point every call at
// another repository); prompts and pagers are off and the locale is C, so
// that messages can be matched.
type Runner struct {
	bin     string
	timeout time.Duration
	env     []string
	args    []string
}

// New returns a Runner of bin (default "git") whose calls each last at
// most timeout, with extraEnv added to the environment and globalArgs put
// before every subcommand.
func New(bin string, timeout time.Duration, extraEnv, globalArgs []string) Runner {
	if bin == "" {
		bin = "git"
	}
	env := make([]string, 0, len(os.Environ())+3+len(extraEnv))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	env = append(env, "GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "LC_ALL=C")
	env = append(env, extraEnv...)
	return Runner{bin: bin, timeout: timeout, env: env, args: globalArgs}
}

// Timeout is the bound of each call.
func (g Runner) Timeout() time.Duration { return g.timeout }

// Run runs git in dir and returns at most limit bytes of its standard
// output (limit <= 0: no limit); truncated reports that there was more, in
// which case git was stopped. okCodes are exit codes besides 0 that mean
// success (git diff --no-index exits 1 when the files differ).
func (g Runner) Run(ctx context.Context, dir string, limit int, okCodes []int, args ...string) (out []byte, truncated bool, err error) {
	path, err := exec.LookPath(g.bin)
	if err != nil {
		return nil, false, ErrMissing
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	full := append(append([]string{"-C", dir}, g.args...), args...)
	cmd := exec.CommandContext(ctx, path, full...)
	cmd.Env = g.env
	// git may start helpers of its own; kill the whole group, and do not
	// wait for a helper that holds stdout after git is gone.
	cmd.SysProcAttr = procgroup.Attr()
	cmd.Cancel = func() error { return procgroup.Signal(cmd.Process, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var stderr limitedBuffer
	stderr.max = maxStderr
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, false, fmt.Errorf("git %s: %w", args[0], err)
	}
	if err := cmd.Start(); err != nil {
		return nil, false, fmt.Errorf("start git %s: %w", args[0], err)
	}
	var r io.Reader = stdout
	if limit > 0 {
		r = io.LimitReader(stdout, int64(limit)+1)
	}
	out, readErr := io.ReadAll(r)
	if limit > 0 && len(out) > limit {
		out, truncated = out[:limit], true
		cancel() // the rest is not wanted
	}
	waitErr := cmd.Wait()
	switch {
	case truncated:
		return out, true, nil
	case ctx.Err() != nil:
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, false, fmt.Errorf("git %s took longer than %s: %w", args[0], g.timeout, context.DeadlineExceeded)
		}
		return nil, false, ctx.Err()
	case readErr != nil:
		return nil, false, fmt.Errorf("read git %s: %w", args[0], readErr)
	}
	var exit *exec.ExitError
	if errors.As(waitErr, &exit) {
		code := exit.ExitCode()
		for _, ok := range okCodes {
			if code == ok {
				return out, false, nil
			}
		}
		return nil, false, &Error{Args: args, Code: code, Stderr: strings.TrimSpace(stderr.String())}
	}
	if waitErr != nil {
		return nil, false, fmt.Errorf("git %s: %w", args[0], waitErr)
	}
	return out, false, nil
}

// limitedBuffer keeps the first max bytes written to it and drops the rest.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
