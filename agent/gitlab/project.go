package gitlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Errors of finding a request's project; errors.go maps them to statuses.
var (
	ErrSessionNotFound = errors.New("session not found")
	errNoProject       = errors.New("no project")
	errNotRepo         = errors.New("not a git repository")
	errNoDir           = errors.New("directory not found")
	errGitMissing      = errors.New("git not found")
	errNotOnGitLab     = errors.New("no remote on the configured GitLab")
)

// SessionDirs adapts a session lookup, the daemon's (*session.Manager).Get,
// to Options.SessionDir.
func SessionDirs(get func(ctx context.Context, id string) (*session.Session, error)) func(context.Context, string) (string, error) {
	return func(ctx context.Context, id string) (string, error) {
		s, err := get(ctx, id)
		if errors.Is(err, session.ErrNotFound) {
			return "", fmt.Errorf("session %s: %w", id, ErrSessionNotFound)
		}
		if err != nil {
			return "", err
		}
		return s.Meta().WorkingDirectory, nil
	}
}

// project is the GitLab project ID (numeric or full path) of a request.
func (s *Service) project(ctx context.Context, p *pb.GitLabProject) (string, error) {
	if id := strings.TrimSpace(p.GetProject()); id != "" {
		if _, err := strconv.ParseUint(id, 10, 64); err == nil {
			return id, nil
		}
		if err := CheckProjectPath(strings.Trim(id, "/")); err != nil {
			return "", fmt.Errorf("%w: %w", errNoProject, err)
		}
		return strings.Trim(id, "/"), nil
	}
	dir := p.GetWorkingDirectory()
	if dir == "" && p.GetSessionId() != "" {
		if s.opts.SessionDir == nil {
			return "", fmt.Errorf("session %s: %w", p.GetSessionId(), ErrSessionNotFound)
		}
		d, err := s.opts.SessionDir(ctx, p.GetSessionId())
		if err != nil {
			return "", err
		}
		dir = d
	}
	if dir == "" {
		return "", fmt.Errorf("%w: name project.project (e.g. group/repo), project.working_directory or project.session_id", errNoProject)
	}
	if strings.HasPrefix(dir, "~/") && s.opts.Home != "" {
		dir = filepath.Join(s.opts.Home, dir[2:])
	}
	remotes, err := s.remotes(ctx, dir)
	if err != nil {
		return "", err
	}
	return projectOf(dir, remotes, s.base)
}

// projectOf picks the project of the first remote on base: origin first,
// then the others by name.
func projectOf(dir string, remotes map[string]string, base *url.URL) (string, error) {
	names := make([]string, 0, len(remotes))
	for n := range remotes {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == "origin":
			return -1
		case b == "origin":
			return 1
		}
		return strings.Compare(a, b)
	})
	var seen []string
	for _, n := range names {
		r, err := ParseRemote(remotes[n])
		if err != nil {
			seen = append(seen, n+" ("+redact(remotes[n])+")")
			continue
		}
		if p, ok := r.ProjectOn(base); ok {
			return p, nil
		}
		seen = append(seen, n+" ("+r.String()+")")
	}
	if len(seen) == 0 {
		return "", fmt.Errorf("%w: %s has no git remote; name the project (group/repo)", errNotOnGitLab, dir)
	}
	return "", fmt.Errorf("%w: no git remote of %s is on %s (%s); set gitlab-url to that GitLab, or name the project (group/repo)",
		errNotOnGitLab, dir, base.Host, strings.Join(seen, ", "))
}

// remotes returns the remote URLs of the checkout at dir, by remote name.
func (s *Service) remotes(ctx context.Context, dir string) (map[string]string, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s", errNoDir, dir)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// remote -v (unlike git config) fails outside a repository and applies
	// url.*.insteadOf.
	cmd := exec.CommandContext(ctx, s.opts.Git, "-C", dir, "remote", "-v")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return nil, fmt.Errorf("%w: %w", errGitMissing, err)
	case errors.As(err, &exit):
		return nil, fmt.Errorf("%w: %s: %s", errNotRepo, dir, strings.TrimSpace(stderr.String()))
	case err != nil:
		return nil, fmt.Errorf("git remote in %s: %w", dir, err)
	}
	remotes := map[string]string{}
	for line := range strings.Lines(string(out)) {
		// "origin\tgit@host:group/repo.git (fetch)"
		name, rest, ok := strings.Cut(strings.TrimSpace(line), "\t")
		val, ok2 := strings.CutSuffix(rest, " (fetch)")
		if ok && ok2 {
			remotes[name] = val
		}
	}
	return remotes, nil
}
