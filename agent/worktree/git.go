package worktree

import (
	"context"
	"strings"
	"time"

	"github.com/betcode-dev/betcode/agent/internal/gitexec"
)

// errGitMissing is returned when the git binary cannot be found.
var errGitMissing = gitexec.ErrMissing

// gitError is a git command that ran and failed.
type gitError = gitexec.Error

// stderrHas reports whether err is a gitError whose message contains s.
func stderrHas(err error, s string) bool { return gitexec.StderrHas(err, s) }

// git runs the git binary (see gitexec): prompts, pagers, colour, advice
// and fsmonitor off, unquoted paths.
type git struct{ r gitexec.Runner }

func newGit(bin string, timeout time.Duration) *git {
	return &git{r: gitexec.New(bin, timeout, []string{"GIT_ADVICE=0"}, globalArgs)}
}

// globalArgs come before the subcommand of every call.
var globalArgs = []string{"--no-pager", "-c", "core.quotepath=off", "-c", "color.ui=false", "-c", "core.fsmonitor=false"}

// run runs git in dir and returns its standard output.
func (g *git) run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	out, _, err := g.r.Run(ctx, dir, 0, nil, args...)
	return out, err
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
