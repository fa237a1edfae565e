package openaiapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Bounds of a command.
const (
	defaultCommandTimeout = 2 * time.Minute
	// maxCommandTimeout stays below the session's hang timeout (10m by
	// default), which would otherwise stop a conversation whose command
	// runs silently.
	maxCommandTimeout = 5 * time.Minute
	// maxCommandOutput is what is kept of a command's output (head and
	// tail); bound cuts it further for the model.
	maxCommandOutput = 1 << 20
	// waitDelay bounds how long a command's pipes are drained after it
	// was killed or exited (a daemon it started may hold them).
	waitDelay = 2 * time.Second
)

// commandEnv is the environment of commands: the agent's, less the API
// key the model has no business reading, plus the session's.
func commandEnv(extra []string) []string {
	env := make([]string, 0, len(os.Environ())+len(extra))
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OPENAI_API_KEY=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// runCommand runs command with bash -c in dir, in its own process group,
// which is killed when ctx ends or the timeout passes. It returns the
// combined output and whether the command failed.
func runCommand(ctx context.Context, dir, command string, timeout time.Duration, env []string) (string, bool) {
	if timeout <= 0 {
		timeout = defaultCommandTimeout
	}
	timeout = min(timeout, maxCommandTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	cmd.Dir = dir
	cmd.Env = env
	var out capBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	setProcessGroup(cmd)
	cmd.WaitDelay = waitDelay
	err := cmd.Run()
	text := out.String()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return text, false
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return text + fmt.Sprintf("\n(killed: the command ran longer than %s)", timeout), true
	case ctx.Err() != nil:
		return text + "\n(killed: the turn was interrupted)", true
	case errors.As(err, &exitErr):
		return text + fmt.Sprintf("\n(exit code %d)", exitErr.ExitCode()), true
	}
	return text + fmt.Sprintf("\n(could not run the command: %v)", err), true
}

// capBuffer keeps the first and the last maxCommandOutput/2 bytes written.
type capBuffer struct {
	mu         sync.Mutex
	head, tail bytes.Buffer
	cut        int64
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	half := maxCommandOutput / 2
	if room := half - b.head.Len(); room > 0 {
		k := min(room, len(p))
		b.head.Write(p[:k])
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	b.tail.Write(p)
	if over := b.tail.Len() - half; over > 0 {
		b.cut += int64(over)
		rest := append([]byte(nil), b.tail.Bytes()[over:]...)
		b.tail.Reset()
		b.tail.Write(rest)
	}
	return n, nil
}

func (b *capBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cut == 0 {
		return b.head.String() + b.tail.String()
	}
	return fmt.Sprintf("%s\n… (%d bytes cut) …\n%s", b.head.String(), b.cut, b.tail.String())
}
