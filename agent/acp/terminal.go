package acp

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/betcode-dev/betcode/agent/internal/procgroup"
)

// Output bounds of terminals: the default kept when the agent names none,
// and the most kept whatever it asks.
const (
	defaultTerminalOutput = 1 << 20
	maxTerminalOutput     = 4 << 20
	maxTerminals          = 16
)

// terminals runs the commands of terminal/create in the session's working
// directory, each in its own process group, with bounded output. Every
// terminal is killed by closeAll.
type terminals struct {
	dir string
	env []string

	mu     sync.Mutex
	next   int
	closed bool
	byID   map[string]*terminal
	wg     sync.WaitGroup

	// started, if set, is told each new terminal's pid (tests).
	started func(pid int)
}

// terminal is one command.
type terminal struct {
	cmd    *exec.Cmd
	out    *tailBuffer
	exited chan struct{} // closed once the command exited
	status acpsdk.TerminalExitStatus
}

func newTerminals(dir string, env []string) *terminals {
	return &terminals{dir: dir, env: env, byID: map[string]*terminal{}}
}

// create starts a command: argv when args are given, else the command as
// a shell command line (sh -c), as agents write them.
func (ts *terminals) create(req acpsdk.CreateTerminalRequest) (acpsdk.CreateTerminalResponse, error) {
	cwd := ts.dir
	if req.Cwd != nil && *req.Cwd != "" {
		rel, err := within(ts.dir, *req.Cwd)
		if err != nil || !inside(ts.dir, *req.Cwd) {
			return acpsdk.CreateTerminalResponse{}, fsError("terminal cwd", *req.Cwd, errOutside)
		}
		cwd = filepath.Join(ts.dir, rel)
	}
	limit := defaultTerminalOutput
	if req.OutputByteLimit != nil && *req.OutputByteLimit >= 0 {
		limit = min(*req.OutputByteLimit, maxTerminalOutput)
	}
	var cmd *exec.Cmd
	if len(req.Args) > 0 {
		cmd = exec.Command(req.Command, req.Args...)
	} else {
		cmd = exec.Command("/bin/sh", "-c", req.Command)
	}
	cmd.Dir = cwd
	cmd.Env = append([]string{}, ts.env...)
	for _, e := range req.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	out := &tailBuffer{limit: limit}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = procgroup.Attr()
	// A grandchild holding the output open must not keep Wait forever.
	cmd.WaitDelay = 2 * time.Second

	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.closed {
		return acpsdk.CreateTerminalResponse{}, errors.New("the session is stopping")
	}
	if len(ts.byID) >= maxTerminals {
		return acpsdk.CreateTerminalResponse{}, fmt.Errorf("too many terminals (%d); release some", maxTerminals)
	}
	if err := cmd.Start(); err != nil {
		return acpsdk.CreateTerminalResponse{}, fmt.Errorf("start %s: %w", req.Command, err)
	}
	ts.next++
	id := "term-" + strconv.Itoa(ts.next)
	t := &terminal{cmd: cmd, out: out, exited: make(chan struct{})}
	ts.byID[id] = t
	if ts.started != nil {
		ts.started(cmd.Process.Pid)
	}
	ts.wg.Go(func() {
		_ = cmd.Wait() // the exit status is read from ProcessState
		var st acpsdk.TerminalExitStatus
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			sig := ws.Signal().String()
			st.Signal = &sig
		} else if cmd.ProcessState != nil {
			code := cmd.ProcessState.ExitCode()
			st.ExitCode = &code
		}
		t.status = st
		close(t.exited)
	})
	return acpsdk.CreateTerminalResponse{TerminalId: id}, nil
}

func (ts *terminals) get(id string) (*terminal, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.byID[id]
	if t == nil {
		return nil, acpsdk.NewInvalidParams(map[string]any{"error": "no terminal " + id})
	}
	return t, nil
}

// output reports a terminal's output so far and its exit status, if any.
func (ts *terminals) output(id string) (acpsdk.TerminalOutputResponse, error) {
	t, err := ts.get(id)
	if err != nil {
		return acpsdk.TerminalOutputResponse{}, err
	}
	out, truncated := t.out.String()
	resp := acpsdk.TerminalOutputResponse{Output: out, Truncated: truncated}
	select {
	case <-t.exited:
		st := t.status
		resp.ExitStatus = &st
	default:
	}
	return resp, nil
}

// waitForExit waits for a terminal's command to exit.
func (ts *terminals) waitForExit(ctx context.Context, id string) (acpsdk.WaitForTerminalExitResponse, error) {
	t, err := ts.get(id)
	if err != nil {
		return acpsdk.WaitForTerminalExitResponse{}, err
	}
	select {
	case <-t.exited:
		return acpsdk.WaitForTerminalExitResponse{ExitCode: t.status.ExitCode, Signal: t.status.Signal}, nil
	case <-ctx.Done():
		return acpsdk.WaitForTerminalExitResponse{}, ctx.Err()
	}
}

// kill kills a terminal's process group; the terminal stays readable.
func (ts *terminals) kill(id string) error {
	t, err := ts.get(id)
	if err != nil {
		return err
	}
	t.kill()
	return nil
}

// release kills a terminal and forgets it.
func (ts *terminals) release(id string) error {
	t, err := ts.get(id)
	if err != nil {
		return err
	}
	t.kill()
	ts.mu.Lock()
	delete(ts.byID, id)
	ts.mu.Unlock()
	return nil
}

// closeAll kills every terminal and waits for them; later creates fail.
func (ts *terminals) closeAll() {
	ts.mu.Lock()
	ts.closed = true
	all := make([]*terminal, 0, len(ts.byID))
	for _, t := range ts.byID {
		all = append(all, t)
	}
	clear(ts.byID)
	ts.mu.Unlock()
	for _, t := range all {
		t.kill()
	}
	ts.wg.Wait()
}

func (t *terminal) kill() {
	select {
	case <-t.exited:
		return
	default:
	}
	_ = procgroup.Signal(t.cmd.Process, syscall.SIGKILL)
}

// tailBuffer keeps the last limit bytes written to it, cut at a UTF-8
// character boundary.
type tailBuffer struct {
	mu        sync.Mutex
	limit     int
	buf       []byte
	truncated bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.limit; over > 0 {
		for over < len(b.buf) && !utf8.RuneStart(b.buf[over]) {
			over++
		}
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.truncated = true
	}
	return len(p), nil
}

// String returns the kept output and whether some was dropped.
func (b *tailBuffer) String() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf), b.truncated
}
