package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Limits of the answers.
const (
	// MaxDirectories is the most subdirectories ListDirectories returns.
	MaxDirectories = 1000
	// MaxChanges is the most files GetChanges returns.
	MaxChanges = 2000
	// MaxDiffBytes is the longest diff GetFileDiff returns.
	MaxDiffBytes = 256 << 10
	// DefaultGitTimeout bounds each git command.
	DefaultGitTimeout = 10 * time.Second
)

// maxStatusBytes bounds the `git status` output read for GetChanges: far
// more than MaxChanges paths need, little enough that a work tree with a
// million untracked files cannot exhaust the agent's memory.
const maxStatusBytes = 32 << 20

// ErrSessionNotFound is what Sessions returns (wrapped or not) for an
// unknown session.
var ErrSessionNotFound = errors.New("session does not exist")

// Sessions is what the service needs of the session manager: a session's
// working directory.
type Sessions interface {
	// WorkingDirectory returns the working directory of session id, or an
	// error wrapping ErrSessionNotFound when there is no such session.
	WorkingDirectory(ctx context.Context, id string) (string, error)
}

// SessionsFunc adapts a function to Sessions.
type SessionsFunc func(ctx context.Context, id string) (string, error)

// WorkingDirectory calls f.
func (f SessionsFunc) WorkingDirectory(ctx context.Context, id string) (string, error) {
	return f(ctx, id)
}

// SessionDirs adapts a session lookup, the daemon's
// (*session.Manager).Get, to Sessions.
func SessionDirs(get func(ctx context.Context, id string) (*session.Session, error)) Sessions {
	return SessionsFunc(func(ctx context.Context, id string) (string, error) {
		s, err := get(ctx, id)
		if errors.Is(err, session.ErrNotFound) {
			return "", fmt.Errorf("session %s: %w", id, ErrSessionNotFound)
		}
		if err != nil {
			return "", err
		}
		return s.Meta().WorkingDirectory, nil
	})
}

// Options configure a Service.
type Options struct {
	// Sessions finds a session's working directory; nil: requests must
	// name a working_directory.
	Sessions Sessions
	// Home is what "~" means; default: the daemon's $HOME.
	Home string
	// Git is the git binary; default "git" on PATH.
	Git string
	// GitTimeout bounds each git command; default DefaultGitTimeout.
	GitTimeout time.Duration
	// Logger gets failures that end as INTERNAL; default: discard.
	Logger *slog.Logger
}

// Service implements pb.WorkspaceServiceServer. It only reads: it lists
// directories and runs read-only git commands.
type Service struct {
	pb.UnimplementedWorkspaceServiceServer
	opts Options
	git  gitRunner
}

var _ pb.WorkspaceServiceServer = (*Service)(nil)

// New returns a Service.
func New(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Home == "" {
		opts.Home, _ = os.UserHomeDir()
	}
	if opts.GitTimeout <= 0 {
		opts.GitTimeout = DefaultGitTimeout
	}
	return &Service{opts: opts, git: newGitRunner(opts.Git, opts.GitTimeout)}
}

// errRelative is a path that is neither absolute nor under "~".
var errRelative = errors.New("must be an absolute path or start with ~/")

// expand turns a request path into a cleaned absolute one: "" and "~" are
// the home directory, "~/x" is under it, anything else must be absolute.
func (s *Service) expand(p string) (string, error) {
	switch {
	case p == "" || p == "~" || strings.HasPrefix(p, "~/"):
		if s.opts.Home == "" {
			return "", errors.New("the agent has no home directory to expand ~")
		}
		return filepath.Join(s.opts.Home, strings.TrimPrefix(p, "~")), nil
	case strings.ContainsRune(p, 0):
		return "", errors.New("must not contain NUL")
	case !filepath.IsAbs(p):
		return "", errRelative
	}
	return filepath.Clean(p), nil
}

// workTree resolves the session's (or the given) working directory and the
// top of the git work tree holding it; ok is false outside one. Errors are
// gRPC statuses.
func (s *Service) workTree(ctx context.Context, sessionID, wd string) (dir, root string, ok bool, err error) {
	if dir, err = s.workingDirectory(ctx, sessionID, wd); err != nil {
		return "", "", false, err
	}
	if root, ok, err = s.git.workTree(ctx, dir); err != nil {
		return "", "", false, s.gitErr(err)
	}
	return dir, root, ok, nil
}

// workingDirectory is the directory a GetChanges or GetFileDiff request
// names: its session's, else its working_directory.
func (s *Service) workingDirectory(ctx context.Context, sessionID, dir string) (string, error) {
	if sessionID != "" {
		if s.opts.Sessions == nil {
			return "", server.Status(codes.InvalidArgument, server.CodeInvalidArgument, "session_id is not supported here: give working_directory")
		}
		d, err := s.opts.Sessions.WorkingDirectory(ctx, sessionID)
		switch {
		case errors.Is(err, ErrSessionNotFound):
			return "", server.Status(codes.NotFound, server.CodeSessionNotFound, "Session does not exist")
		case err != nil:
			return "", s.internal("look up session", err)
		}
		dir = d
	} else if dir == "" {
		return "", server.Status(codes.InvalidArgument, server.CodeInvalidArgument, "session_id or working_directory is required")
	}
	p, err := s.expand(dir)
	if err != nil {
		return "", server.Status(codes.InvalidArgument, server.CodeInvalidArgument, fmt.Sprintf("working directory %q: %v", dir, err))
	}
	if err := dirError(p); err != nil {
		return "", err
	}
	return p, nil
}

// dirError is the status for a path that is not a directory the agent can
// list, or nil.
func dirError(p string) error {
	fi, err := os.Stat(p)
	switch {
	case missing(err):
		return server.Status(codes.NotFound, server.CodeDirectoryNotFound, p+" does not exist")
	case errors.Is(err, os.ErrPermission):
		return server.Status(codes.PermissionDenied, server.CodeDirectoryNotReadable, p+" is not readable")
	case err != nil:
		return server.Status(codes.InvalidArgument, server.CodeInvalidArgument, err.Error())
	case !fi.IsDir():
		return server.Status(codes.InvalidArgument, server.CodeInvalidArgument, p+" is not a directory")
	}
	return nil
}

// missing tells whether a stat error means the path does not exist (a
// component that is a file, as in file.txt/x, means that too).
func missing(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// gitErr maps a git failure to a status error.
func (s *Service) gitErr(err error) error {
	var ge *gitError
	switch {
	case errors.Is(err, errGitMissing):
		return server.Status(codes.FailedPrecondition, server.CodeGitUnavailable, "git is not installed on the agent's machine (or not on its PATH)")
	case errors.Is(err, context.Canceled):
		return server.Status(codes.Canceled, "", err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return server.Status(codes.DeadlineExceeded, "", err.Error())
	case errors.As(err, &ge):
		// A refusal such as "detected dubious ownership" is the user's to
		// fix; say what git said.
		return server.Status(codes.FailedPrecondition, server.CodeInvalidArgument, ge.Error())
	}
	return s.internal("run git", err)
}

func (s *Service) internal(what string, err error) error {
	s.opts.Logger.Warn("workspace: "+what+" failed", "err", err)
	return server.Status(codes.Internal, server.CodeInternal, what+": "+err.Error())
}
