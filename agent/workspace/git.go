package workspace

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/betcode-dev/betcode/agent/internal/gitexec"
)

// errGitMissing is returned when the git binary cannot be found.
var errGitMissing = gitexec.ErrMissing

// gitError is a git command that ran and failed.
type gitError = gitexec.Error

// gitRunner runs git with an environment that no user setting or inherited
// variable can bend: no pager, no colour, no external diff or textconv
// driver, no fsmonitor daemon, unquoted paths, the C locale, and no
// optional locks (a read-only view must not compete with the user's git
// for index.lock).
type gitRunner struct{ gitexec.Runner }

func newGitRunner(bin string, timeout time.Duration) gitRunner {
	return gitRunner{gitexec.New(bin, timeout, []string{"GIT_OPTIONAL_LOCKS=0"}, globalArgs)}
}

// globalArgs come before the subcommand of every call.
var globalArgs = []string{
	"--no-pager", "--literal-pathspecs",
	"-c", "core.quotepath=off", "-c", "color.ui=false", "-c", "core.fsmonitor=false",
	"-c", "diff.noprefix=false", "-c", "diff.mnemonicprefix=false",
}

// run is gitexec.Runner.Run.
func (g gitRunner) run(ctx context.Context, dir string, limit int, okCodes []int, args ...string) ([]byte, bool, error) {
	return g.Run(ctx, dir, limit, okCodes, args...)
}

// workTree returns the top of the work tree that holds dir, or ok=false
// when dir is in none (or inside a .git directory).
func (g gitRunner) workTree(ctx context.Context, dir string) (root string, ok bool, err error) {
	out, _, err := g.run(ctx, dir, 0, nil, "rev-parse", "--is-inside-work-tree", "--show-toplevel")
	var ge *gitError
	if errors.As(err, &ge) && notARepo(ge.Stderr) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "true" {
		return "", false, nil
	}
	return lines[1], true, nil
}

// notARepo tells whether git's complaint means "no work tree here" rather
// than a failure worth reporting (a dubious-ownership refusal, say).
func notARepo(stderr string) bool {
	return strings.Contains(stderr, "not a git repository") ||
		strings.Contains(stderr, "must be run in a work tree")
}

// emptyTree returns the id of the empty tree in the repository's object
// format (SHA-1 or SHA-256): what HEAD is compared with before the first
// commit.
func (g gitRunner) emptyTree(ctx context.Context, root string) (string, error) {
	out, _, err := g.run(ctx, root, 0, nil, "hash-object", "-t", "tree", "/dev/null")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// statusArgs is `git status` in the one format parseStatus reads. It skips
// what costs without showing in the view: counting commits ahead of and
// behind the upstream (a walk of history), and a status run inside every
// submodule (one shows when its commit changed, not when its own work tree
// is dirty).
func statusArgs(paths ...string) []string {
	args := []string{"status", "--porcelain=v2", "--branch", "--no-ahead-behind", "-z", "--untracked-files=all", "--renames", "--ignore-submodules=dirty"}
	if len(paths) > 0 {
		args = append(append(args, "--"), paths...)
	}
	return args
}

// diffFlags pin the diff output whatever the user's configuration.
var diffFlags = []string{"--no-color", "--no-ext-diff", "--no-textconv", "--no-relative", "-M"}

// porcelain is the parsed output of `git status --porcelain=v2 --branch -z`.
type porcelain struct {
	Branch  string // empty when detached
	Initial bool   // no commit yet
	Entries []statusEntry
}

// statusEntry is one changed path.
type statusEntry struct {
	Kind     byte   // '1' changed, '2' renamed or copied, 'u' unmerged, '?' untracked
	XY       string // index and work tree status letters, "." for unchanged
	Path     string
	OrigPath string // kind '2' only
}

// parseStatus reads `git status --porcelain=v2 --branch -z` output.
// Unknown records are skipped so that a newer git cannot break the view;
// a malformed one is an error.
func parseStatus(out []byte) (porcelain, error) {
	var st porcelain
	recs := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	for i := 0; i < len(recs); i++ {
		rec := recs[i]
		if rec == "" {
			continue
		}
		switch rec[0] {
		case '#':
			switch {
			case strings.HasPrefix(rec, "# branch.oid "):
				st.Initial = strings.TrimPrefix(rec, "# branch.oid ") == "(initial)"
			case strings.HasPrefix(rec, "# branch.head "):
				if h := strings.TrimPrefix(rec, "# branch.head "); h != "(detached)" {
					st.Branch = h
				}
			}
		case '1':
			f := strings.SplitN(rec, " ", 9)
			if len(f) != 9 || len(f[1]) != 2 {
				return st, fmt.Errorf("malformed status record %q", rec)
			}
			st.Entries = append(st.Entries, statusEntry{Kind: '1', XY: f[1], Path: f[8]})
		case '2':
			f := strings.SplitN(rec, " ", 10)
			if len(f) != 10 || len(f[1]) != 2 || i+1 >= len(recs) {
				return st, fmt.Errorf("malformed status record %q", rec)
			}
			i++ // with -z the original path is the next record
			st.Entries = append(st.Entries, statusEntry{Kind: '2', XY: f[1], Path: f[9], OrigPath: recs[i]})
		case 'u':
			f := strings.SplitN(rec, " ", 11)
			if len(f) != 11 || len(f[1]) != 2 {
				return st, fmt.Errorf("malformed status record %q", rec)
			}
			st.Entries = append(st.Entries, statusEntry{Kind: 'u', XY: f[1], Path: f[10]})
		case '?':
			if len(rec) < 3 {
				return st, fmt.Errorf("malformed status record %q", rec)
			}
			st.Entries = append(st.Entries, statusEntry{Kind: '?', XY: "??", Path: rec[2:]})
		}
	}
	return st, nil
}

// numstat is one file's line counts from `git diff --numstat`.
type numstat struct {
	Added, Deleted uint32
	Binary         bool
}

// parseNumstat reads `git diff --numstat -z` output, keyed by the new path
// (a rename's record is "A\tD\t\0old\0new\0").
func parseNumstat(out []byte) (map[string]numstat, error) {
	m := map[string]numstat{}
	recs := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	for i := 0; i < len(recs); i++ {
		rec := recs[i]
		if rec == "" {
			continue
		}
		f := strings.SplitN(rec, "\t", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("malformed numstat record %q", rec)
		}
		path := f[2]
		if path == "" { // a rename: old and new path follow
			if i+2 >= len(recs) {
				return nil, fmt.Errorf("malformed numstat rename %q", rec)
			}
			path = recs[i+2]
			i += 2
		}
		var n numstat
		if f[0] == "-" && f[1] == "-" {
			n.Binary = true
		} else {
			a, err1 := strconv.ParseUint(f[0], 10, 32)
			d, err2 := strconv.ParseUint(f[1], 10, 32)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("malformed numstat counts %q", rec)
			}
			n.Added, n.Deleted = uint32(a), uint32(d)
		}
		m[path] = n
	}
	return m, nil
}
