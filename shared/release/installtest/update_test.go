package installtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/shared/release"
)

// TestUpdate updates an installed v9.1.0 agent from a local release server
// serving v9.2.0 (the same tree linked with another main.version, signed
// with the same key; only the agent's archive): --check reports it, update replaces the binary and
// keeps the old one as .previous, a tampered archive is refused and
// changes nothing.
func TestUpdate(t *testing.T) {
	r := v1(t)
	ctx, cancel := buildContext(t)
	defer cancel()
	v2 := filepath.Join(base, "release-v2")
	start := time.Now()
	if err := buildRelease(ctx, v2, "v9.2.0", r.key, "betcode-agent"); err != nil {
		t.Fatal(err)
	}
	t.Logf("release v9.2.0 built in %s", time.Since(start).Round(time.Millisecond))
	url := serve(t, v2)
	agent := extract(t, r, "betcode-agent")
	run := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, agent, args...).CombinedOutput()
		return string(out), err
	}
	version := func(bin string) string {
		out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", bin, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	flags := []string{"--base-url", url, "--allowed-signers", r.signers}

	out, err := run(append([]string{"update", "--check"}, flags...)...)
	if err != nil || !strings.Contains(out, "betcode-agent v9.1.0; the release at "+url+" is v9.2.0") {
		t.Fatalf("update --check: %v\n%s", err, out)
	}
	if got := version(agent); got != "betcode-agent version v9.1.0" {
		t.Fatalf("--check changed the binary: %s", got)
	}

	// A tampered archive: refused, nothing replaced.
	bad := linkRelease(t, v2, "v2-tampered")
	a := filepath.Join(bad, release.ArchiveName("betcode-agent", "v9.2.0", "linux", "amd64"))
	b, _ := os.ReadFile(a)
	b[len(b)/3] ^= 0x01
	os.Remove(a)
	os.WriteFile(a, b, 0o644)
	out, err = run("update", "--base-url", serve(t, bad), "--allowed-signers", r.signers)
	if err == nil || !strings.Contains(out, "does not match checksums.txt") {
		t.Fatalf("update from a tampered release: %v\n%s", err, out)
	}
	if got := version(agent); got != "betcode-agent version v9.1.0" {
		t.Fatalf("a refused update changed the binary: %s", got)
	}
	// Not signed by a trusted key (the release key is embedded): refused.
	out, err = run("update", "--base-url", url)
	if err == nil || !strings.Contains(out, "does not verify with the release key") {
		t.Fatalf("update from a release signed by another key: %v\n%s", err, out)
	}

	out, err = run(append([]string{"update"}, flags...)...)
	if err != nil {
		t.Fatalf("update: %v\n%s", err, out)
	}
	t.Logf("betcode-agent update:\n%s", out)
	for _, want := range []string{"signature and SHA-256 good", "v9.1.0 -> v9.2.0", "no betcode-agent service runs here"} {
		if !strings.Contains(out, want) {
			t.Errorf("update's output lacks %q", want)
		}
	}
	if got := version(agent); got != "betcode-agent version v9.2.0" {
		t.Errorf("after update: %s", got)
	}
	if got := version(agent + release.PreviousSuffix); got != "betcode-agent version v9.1.0" {
		t.Errorf("the previous binary: %s", got)
	}
	out, err = run(append([]string{"update", "--check"}, flags...)...)
	if err != nil || !strings.Contains(out, "is up to date") {
		t.Errorf("update --check after the update: %v\n%s", err, out)
	}
}
