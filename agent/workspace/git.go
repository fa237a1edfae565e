package workspace

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
)

// errGitMissing is returned when the git binary cannot be found.
var errGitMissing = errors.New("git is not installed on this machine")

// gitError is a git command that ran and failed.
type gitError struct {
	Args   []string
	Code   int    // exit code
	Stderr string // trimmed, at most a few KiB
}

func (e *gitError) Error() string {
	msg := e.Stderr
	if msg == "" {
		msg = "exit status " + strconv.Itoa(e.Code)
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.Args, " "), msg)
}

// gitRunner runs git with an environment that no user setting or inherited
// variable can bend: no pager, no colour, no external diff or textconv
// driver, no fsmonitor daemon, unquoted paths, the C locale, and no
// optional locks (a read-only view must not compete with the user's git
// for index.lock).
type gitRunner struct {
	bin     string
	timeout time.Duration
	env     []string
}

func newGitRunner(bin string, timeout time.Duration) gitRunner {
	env := make([]string, 0, len(os.Environ())+4)
	for _, kv := range os.Environ() {
		// GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE... inherited from whatever
		// started the daemon would point every call at the wrong repository.
		if strings.HasPrefix(kv, "GIT_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "LC_ALL=C")
	return gitRunner{bin: bin, timeout: timeout, env: env}
}

// globalArgs come before the subcommand of every call.
var globalArgs = []string{
	"--no-pager", "--literal-pathspecs",
	"-c", "core.quotepath=off", "-c", "color.ui=false", "-c", "core.fsmonitor=false",
	"-c", "diff.noprefix=false", "-c", "diff.mnemonicprefix=false",
}

// run runs git in dir and returns at most limit bytes of its standard
// output (limit <= 0: no limit); truncated reports that there was more, in
// which case git was stopped. okCodes are exit codes besides 0 that mean
// success (git diff --no-index exits 1 when the files differ).
func (g gitRunner) run(ctx context.Context, dir string, limit int, okCodes []int, args ...string) (out []byte, truncated bool, err error) {
	bin := g.bin
	if bin == "" {
		bin = "git"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, false, errGitMissing
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	full := append(append([]string{"-C", dir}, globalArgs...), args...)
	cmd := exec.CommandContext(ctx, path, full...)
	cmd.Env = g.env
	// git may start helpers of its own; kill the whole group, and do not
	// wait for a helper that holds stdout after git is gone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var stderr limitedBuffer
	stderr.max = 4 << 10
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
		return nil, false, &gitError{Args: args, Code: code, Stderr: strings.TrimSpace(stderr.String())}
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
