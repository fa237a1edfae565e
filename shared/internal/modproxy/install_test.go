package modproxy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// installBudget bounds TestGoInstallAtVersion: the install compiles the
// agent (about 40 s on a warm build cache here, 2 min cold on 2 cores,
// past 5 min while other builds load the machine).
const installBudget = 10 * time.Minute

// repoRoot returns the root of the git repository holding this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse --show-toplevel: %v (the test needs the repository's git history)", err)
	}
	return strings.TrimSpace(string(out))
}

// TestGoInstallAtVersion is what a user does to install the agent from
// source: `go install github.com/betcode-dev/betcode/agent/cmd/betcode-agent@vX.Y.Z`
// outside the workspace. The modules are served, as committed at HEAD,
// by a file:// proxy in front of the module cache (so no network is
// needed for the dependencies already downloaded), into an empty module
// cache, and the binary installed must report the version installed.
func TestGoInstallAtVersion(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), installBudget)
	defer cancel()
	root := repoRoot(t)
	p := &Proxy{Dir: t.TempDir(), Repo: root, Rev: "HEAD"}
	sharedPath := "github.com/betcode-dev/betcode/shared"
	sharedVersion, err := p.Required(ctx, "agent", sharedPath)
	if err != nil {
		t.Fatal(err)
	}
	if sharedVersion == "" {
		t.Fatalf("agent/go.mod does not require %s", sharedPath)
	}
	gomod, err := p.read(ctx, "agent/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(gomod), "\nreplace ") {
		t.Fatalf("agent/go.mod has a replace directive: go install @version refuses a module with one (go.work resolves the local modules)")
	}
	// The release convention (docs/upgrading.md): every module is tagged
	// at the same version, and agent and relay require shared at it.
	for _, m := range []Module{{Dir: "shared", Version: sharedVersion}, {Dir: "agent", Version: sharedVersion}} {
		if _, err := p.Add(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	cache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	downloads := "file://" + filepath.Join(strings.TrimSpace(string(cache)), "cache", "download")
	gobin := t.TempDir()
	cmd := exec.CommandContext(ctx, "go", "install", "github.com/betcode-dev/betcode/agent/cmd/betcode-agent@"+sharedVersion)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(),
		// CGO off and -trimpath, as the release builds: their compiled
		// dependencies are in the build cache then, not built again.
		"GOWORK=off", "GOFLAGS=-mod=mod -modcacherw -trimpath", "CGO_ENABLED=0",
		"GOPROXY="+p.URL()+","+downloads+",https://proxy.golang.org",
		"GONOSUMDB=github.com/betcode-dev", "GOSUMDB=off",
		"GOMODCACHE="+t.TempDir(), "GOBIN="+gobin,
	)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install ...@%s: %v\n%s", sharedVersion, err, out)
	}
	t.Logf("go install took %s", time.Since(start).Round(time.Second))
	out, err := exec.CommandContext(ctx, filepath.Join(gobin, "betcode-agent"), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("betcode-agent --version: %v\n%s", err, out)
	}
	if want := "betcode-agent version " + sharedVersion; strings.TrimSpace(string(out)) != want {
		t.Fatalf("betcode-agent --version = %q, want %q", strings.TrimSpace(string(out)), want)
	}
}
