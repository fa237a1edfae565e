package deploytest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// repo is the repository root, from this package's directory.
const repo = "../.."

// tool returns the path of a test tool: $env, else PATH, else
// ~/.cache/betcode/bin (where make test-deps installs it). Missing, it
// fails the test under CI and skips it elsewhere.
func tool(t testing.TB, name, env, install string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cache", "betcode", "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	how := "run `make test-deps` (" + install + "), or set " + env
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing; CI must install it before the tests: %s", name, how)
	}
	t.Skipf("%s is missing: %s", name, how)
	return ""
}

func helmBin(t testing.TB) string {
	return tool(t, "helm", "BETCODE_HELM", "go install helm.sh/helm/v3/cmd/helm@v3.22.0")
}

func kubeconformBin(t testing.TB) string {
	return tool(t, "kubeconform", "BETCODE_KUBECONFORM", "go install github.com/yannh/kubeconform/cmd/kubeconform@v0.8.0")
}

// run runs a tool and returns its stdout; err carries stderr.
func run(t testing.TB, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &toolError{cmd: filepath.Base(bin) + " " + strings.Join(args, " "), err: err, stderr: stderr.String() + stdout.String()}
	}
	return stdout.String(), nil
}

// toolError is a failed tool run, with what it printed.
type toolError struct {
	cmd, stderr string
	err         error
}

func (e *toolError) Error() string { return e.cmd + ": " + e.err.Error() + "\n" + e.stderr }
func (e *toolError) Unwrap() error { return e.err }
