package installtest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/shared/release"
)

// base holds everything the tests share, world-readable (0755) so that the
// fresh users can read the CA, the allowed signers and the fake claude.
var base string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "betcode-installtest-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "installtest:", err)
		os.Exit(1)
	}
	base = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// built is a release made once for linux/amd64 and shared by the tests.
type built struct {
	dir     string // the release directory
	version string
	key     string // the test's signing key
	signers string // its allowed_signers file
	took    time.Duration
}

var (
	firstOnce sync.Once
	first     built
	firstErr  error
)

// v1 returns the shared release, building it on first use.
func v1(t *testing.T) built {
	t.Helper()
	firstOnce.Do(func() {
		ctx, cancel := buildContext(t)
		defer cancel()
		keyDir := filepath.Join(base, "key")
		if firstErr = os.MkdirAll(keyDir, 0o755); firstErr != nil {
			return
		}
		key := filepath.Join(keyDir, "signing-key")
		line, err := release.DevKey(ctx, key)
		if err != nil {
			firstErr = err
			return
		}
		signers := filepath.Join(keyDir, "allowed_signers")
		if firstErr = os.WriteFile(signers, line, 0o644); firstErr != nil {
			return
		}
		if firstErr = snapshot(ctx, repoRoot(), srcDir()); firstErr != nil {
			return
		}
		first = built{dir: filepath.Join(base, "release-v1"), version: "v9.1.0", key: key, signers: signers}
		start := time.Now()
		firstErr = buildRelease(ctx, first.dir, first.version, key)
		first.took = time.Since(start)
	})
	if firstErr != nil {
		t.Fatalf("make release for linux/amd64: %v", firstErr)
	}
	return first
}

// buildContext bounds a build by the test binary's -timeout (make unit:
// 20m), less a margin to report it: a build's time depends on the machine's
// load and on how much of the build cache is warm, not on the code.
func buildContext(t *testing.T) (context.Context, context.CancelFunc) {
	if d, ok := t.Deadline(); ok {
		return context.WithDeadline(context.Background(), d.Add(-30*time.Second))
	}
	return context.WithCancel(context.Background())
}

// buildRelease runs make release's tool (shared/cmd/betcode-release,
// built once without -race: gzip and SHA-256 under the race detector are
// several times slower) for linux/amd64: the binaries named, or all three.
// The tool finds cyclonedx-gomod where make test-deps installs it.
func buildRelease(ctx context.Context, out, version, key string, binaries ...string) error {
	toolOnce.Do(func() {
		tool = filepath.Join(base, "betcode-release")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", tool, "./shared/cmd/betcode-release")
		cmd.Dir = repoRoot()
		if msg, err := cmd.CombinedOutput(); err != nil {
			toolErr = fmt.Errorf("go build betcode-release: %w\n%s", err, msg)
		}
	})
	if toolErr != nil {
		return toolErr
	}
	cmd := exec.CommandContext(ctx, tool, "build", "-root", srcDir(), "-out", out, "-version", version,
		"-source-date-epoch", "1796000000", "-signing-key", key,
		"-targets", "linux/amd64", "-binaries", strings.Join(binaries, ","))
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("betcode-release build: %w\n%s", err, msg)
	}
	return os.Chmod(out, 0o755)
}

var (
	toolOnce sync.Once
	tool     string
	toolErr  error
)

// srcDir is the snapshot of the working tree every release is built from.
func srcDir() string { return filepath.Join(base, "src") }

// snapshot copies the working tree at root into dst once, so that the
// builds compared are of one tree even while the working tree changes (on
// CI's clean clone it is that clone): a local clone of HEAD (git, for the
// SBOM's version of the main module) with the working tree's changed,
// untracked and deleted files of the Go modules laid over it.
func snapshot(ctx context.Context, root, dst string) error {
	git := func(dir string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return out, nil
	}
	if _, err := git(root, "clone", "-q", "--local", "--no-checkout", root, dst); err != nil {
		return err
	}
	if _, err := git(dst, "checkout", "-q", "HEAD", "--", "."); err != nil {
		return err
	}
	paths := []string{"--", "go.work", "go.work.sum", "shared", "agent", "relay"}
	changed, err := git(root, append([]string{"ls-files", "-z", "--modified", "--others", "--exclude-standard"}, paths...)...)
	if err != nil {
		return err
	}
	for _, f := range strings.Split(string(changed), "\x00") {
		if f == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // deleted meanwhile, or a directory
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			return err
		}
	}
	deleted, err := git(root, append([]string{"ls-files", "-z", "--deleted"}, paths...)...)
	if err != nil {
		return err
	}
	for _, f := range strings.Split(string(deleted), "\x00") {
		if f != "" {
			os.Remove(filepath.Join(dst, f))
		}
	}
	return nil
}

// repoRoot is the repository's root, where go.work is.
func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..", "..")
}

// serve serves a release directory on loopback.
func serve(t *testing.T, dir string) string {
	t.Helper()
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestReproducible builds linux/amd64's archives a second time into another
// directory, from the same snapshot of the tree, and expects the same bytes: archives, SBOMs, checksums.txt and
// (Ed25519 signatures being deterministic) its signature. Both builds share
// the Go build cache, so the compiled packages are the same objects; what
// is rebuilt and compared is every link (go build does not cache linked
// binaries), the archives, the SBOMs and the checksums.
func TestReproducible(t *testing.T) {
	r := v1(t)
	t.Logf("first build (linux/amd64, 3 binaries and SBOMs): %s", r.took.Round(time.Millisecond))
	ctx, cancel := buildContext(t)
	defer cancel()
	again := filepath.Join(base, "release-v1-again")
	start := time.Now()
	if err := buildRelease(ctx, again, r.version, r.key); err != nil {
		t.Fatal(err)
	}
	t.Logf("second build: %s", time.Since(start).Round(time.Millisecond))
	names := func(dir string) []string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, e := range ents {
			n = append(n, e.Name())
		}
		return n
	}
	a, b := names(r.dir), names(again)
	if strings.Join(a, " ") != strings.Join(b, " ") {
		t.Fatalf("the two builds made different files:\n%v\n%v", a, b)
	}
	for _, n := range a {
		x, _ := os.ReadFile(filepath.Join(r.dir, n))
		y, _ := os.ReadFile(filepath.Join(again, n))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two builds of the same tree (%d and %d bytes)", n, len(x), len(y))
		}
	}
	sums, err := os.ReadFile(filepath.Join(r.dir, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"betcode-agent_v9.1.0_linux_amd64.tar.gz", "betcode_v9.1.0_linux_amd64.tar.gz",
		"betcode-relay_v9.1.0_linux_amd64.tar.gz", "betcode-agent_v9.1.0_linux_amd64.tar.gz.cdx.json"} {
		if !strings.Contains(string(sums), "  "+want+"\n") {
			t.Errorf("checksums.txt has no %s:\n%s", want, sums)
		}
	}
	signers, _ := os.ReadFile(r.signers)
	if n, err := release.VerifyDir(ctx, r.dir, signers); err != nil || n != 3 {
		t.Errorf("verify-release of the build: %d archives, %v", n, err)
	}
}
