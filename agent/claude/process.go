package claude

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/betcode-dev/betcode/agent/internal/procgroup"
)

// Options describe one CLI subprocess.
type Options struct {
	Bin            string   // path or name of the claude binary (required)
	Dir            string   // working directory of the child (the project)
	Model          string   // --model, optional
	SessionID      string   // --session-id for a new session, or the id to --resume
	Resume         bool     // continue SessionID with --resume
	AllowedTools   []string // --allowedTools
	PermissionMode string   // --permission-mode, optional (e.g. "plan")
	MaxTurns       int      // --max-turns, optional (0: the CLI's default)
	ExtraArgs      []string // appended verbatim
	Env            []string // extra environment (KEY=VALUE), added to os.Environ()
	Logger         *slog.Logger
}

// Args returns the command-line arguments for opts (without the binary).
// The CLI is never launched with --bare: that removes AskUserQuestion,
// TodoWrite and subagents.
func (o Options) Args() []string {
	args := []string{"-p",
		"--input-format", "stream-json",
		"--output-format", "stream-json",
		"--verbose",
		"--include-partial-messages",
		"--permission-prompt-tool", "stdio",
	}
	if o.Model != "" {
		args = append(args, "--model", o.Model)
	}
	if o.SessionID != "" {
		if o.Resume {
			args = append(args, "--resume", o.SessionID)
		} else {
			args = append(args, "--session-id", o.SessionID)
		}
	}
	if len(o.AllowedTools) > 0 {
		args = append(args, "--allowedTools", strings.Join(o.AllowedTools, ","))
	}
	if o.PermissionMode != "" {
		args = append(args, "--permission-mode", o.PermissionMode)
	}
	if o.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(o.MaxTurns))
	}
	return append(args, o.ExtraArgs...)
}

// Process is a running CLI.
type Process struct {
	*Conn
	cmd    *exec.Cmd
	stderr *tailBuffer
	done   chan struct{}

	waitOnce sync.Once
	waitErr  error
}

// BinaryError says the configured binary cannot be used; its message names
// the setting that fixes it.
type BinaryError struct {
	Bin string
	Err error
}

func (e *BinaryError) Error() string {
	return fmt.Sprintf("claude CLI %q is not usable (%v): install Claude Code (npm install -g @anthropic-ai/claude-code) or point --claude-bin (BETCODE_CLAUDE_BIN) at a working binary", e.Bin, e.Err)
}

func (e *BinaryError) Unwrap() error { return e.Err }

// Resolve finds bin on PATH (or checks the path) and returns an absolute path.
func Resolve(bin string) (string, error) {
	if bin == "" {
		bin = "claude"
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		return "", &BinaryError{Bin: bin, Err: err}
	}
	return p, nil
}

var versionRE = regexp.MustCompile(`\d+\.\d+\.\d+`)

// Version runs `bin --version` and returns the version number it prints.
func Version(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return "", &BinaryError{Bin: bin, Err: fmt.Errorf("%w: %s", err, bytes.TrimSpace(out))}
	}
	v := versionRE.Find(out)
	if v == nil {
		return "", &BinaryError{Bin: bin, Err: fmt.Errorf("unexpected --version output %q", bytes.TrimSpace(out))}
	}
	return string(v), nil
}

// Start spawns the CLI. The child lives until Stop, Kill, or it exits on its
// own; ctx only bounds the start itself.
func Start(ctx context.Context, o Options) (*Process, error) {
	if o.Bin == "" {
		return nil, &BinaryError{Bin: o.Bin, Err: errors.New("no binary configured")}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	args := o.Args()
	cmd := exec.Command(o.Bin, args...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), o.Env...)
	// Own process group: a Ctrl-C at the agent's terminal must not reach the
	// CLI directly; the agent decides how to stop it.
	cmd.SysProcAttr = procgroup.Attr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("claude stdin pipe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("claude stdout pipe: %w", err)
	}
	tail := &tailBuffer{max: 16 << 10}
	cmd.Stderr = tail // os/exec copies stderr concurrently, so the pipe never fills
	if err := cmd.Start(); err != nil {
		return nil, &BinaryError{Bin: o.Bin, Err: err}
	}
	log.Debug("claude: started", "pid", cmd.Process.Pid, "args", args, "dir", o.Dir)
	p := &Process{
		Conn:   NewConn(stdin, stdout, log.With("pid", cmd.Process.Pid)),
		cmd:    cmd,
		stderr: tail,
		done:   make(chan struct{}),
	}
	return p, nil
}

// Wait waits for the process to exit and returns its exit error (nil for
// exit 0). Call it only after Next returned io.EOF: os/exec closes stdout
// when Wait returns. Safe to call more than once.
func (p *Process) Wait() error {
	p.waitOnce.Do(func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	})
	return p.waitErr
}

// Stop ends the process gracefully: it asks the CLI to end the session (which
// aborts a running turn and writes its result), closes stdin, and escalates to
// SIGTERM and then SIGKILL when the child is still there after grace each.
// Whoever reads stdout must keep reading until EOF and call Wait, which is
// what Stop waits for.
func (p *Process) Stop(grace time.Duration) {
	_, _ = p.EndSession()
	_ = p.CloseStdin()
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t := time.NewTimer(grace)
		select {
		case <-p.done:
			t.Stop()
			return
		case <-t.C:
		}
		_ = p.Signal(sig)
	}
	<-p.done
}

// Done is closed when the process has exited (after Wait was called).
func (p *Process) Done() <-chan struct{} { return p.done }

// Pid returns the child's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stderr returns the last bytes the CLI wrote to stderr.
func (p *Process) Stderr() string { return p.stderr.String() }

// Signal sends sig to the child.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill kills the child at once.
func (p *Process) Kill() error { return p.cmd.Process.Kill() }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

var _ io.Writer = (*tailBuffer)(nil)
