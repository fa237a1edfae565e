package openaiapi

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestRunCommand(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	env := commandEnv([]string{"EXTRA=1"})
	tests := []struct {
		name    string
		command string
		timeout time.Duration
		want    string
		failed  bool
	}{
		{"output and cwd", "echo hi; basename \"$PWD\"", 0, "hi\n", false},
		{"session env, no API key", "echo \"$EXTRA-${OPENAI_API_KEY:-none}\"", 0, "1-none\n", false},
		{"exit code", "exit 7", 0, "(exit code 7)", true},
		{"timeout kills the group", "sleep 30 & sleep 30; wait", 300 * time.Millisecond, "ran longer than 300ms", true},
		{"bounded output", "head -c 3000000 /dev/zero | tr '\\0' x", 0, "bytes cut", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			began := time.Now()
			out, failed := runCommand(context.Background(), dir, tc.command, tc.timeout, env)
			if failed != tc.failed || !strings.Contains(out, tc.want) {
				t.Errorf("= %.200q (failed %v), want %q (failed %v)", out, failed, tc.want, tc.failed)
			}
			if len(out) > maxCommandOutput+100 {
				t.Errorf("output of %d bytes", len(out))
			}
			if time.Since(began) > 10*time.Second {
				t.Errorf("took %s", time.Since(began))
			}
		})
	}
}

func TestBound(t *testing.T) {
	s := strings.Repeat("é", maxOutput)
	b := bound(s)
	if len(b) > maxOutput+100 || !strings.Contains(b, "bytes cut") || !strings.HasPrefix(b, "é") || !strings.HasSuffix(b, "é") {
		t.Errorf("bound: %d bytes", len(b))
	}
	if bound("short") != "short" {
		t.Error("bound changed a short string")
	}
}
