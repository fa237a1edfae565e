package gitexec

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRun: git's output, its failures as *Error with stderr, exit codes
// that mean success, output cut at a limit, and a missing binary.
func TestRun(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is missing: apt-get install git")
	}
	dir := t.TempDir()
	g := New("", 10*time.Second, nil, []string{"--no-pager"})
	if _, _, err := g.Run(t.Context(), dir, 0, nil, "init", "-q"); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"a": "one\n", "b": "two\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name      string
		g         Runner
		limit     int
		okCodes   []int
		args      []string
		want      string
		truncated bool
		wantErr   func(error) bool
	}{
		{name: "output", g: g, args: []string{"rev-parse", "--is-inside-work-tree"}, want: "true\n"},
		{name: "cut at the limit", g: g, limit: 3, args: []string{"rev-parse", "--is-inside-work-tree"}, want: "tru", truncated: true},
		{name: "failure", g: g, args: []string{"rev-parse", "--verify", "nope"}, wantErr: func(err error) bool {
			var ge *Error
			return errors.As(err, &ge) && ge.Code != 0 && StderrHas(err, "fatal") && strings.HasPrefix(err.Error(), "git rev-parse --verify nope: ")
		}},
		{name: "exit code that means success", g: g, okCodes: []int{1}, args: []string{"diff", "--no-index", "--quiet", "a", "b"}},
		{name: "no git", g: New("/nonexistent/git", time.Second, nil, nil), args: []string{"status"}, wantErr: func(err error) bool { return errors.Is(err, ErrMissing) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, truncated, err := tc.g.Run(t.Context(), dir, tc.limit, tc.okCodes, tc.args...)
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil || string(out) != tc.want || truncated != tc.truncated {
				t.Fatalf("Run = %q, %v, %v; want %q, %v", out, truncated, err, tc.want, tc.truncated)
			}
		})
	}
}

// TestRunCancelled: a cancelled context ends the call with its error.
func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := New("", time.Second, nil, nil).Run(ctx, t.TempDir(), 0, nil, "status")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
}
