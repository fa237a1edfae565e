package installtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/shared/release"
)

// TestInstallFreshUser runs scripts/install.sh as a new user against the
// local release server: the binaries land in ~/.local/bin and run.
func TestInstallFreshUser(t *testing.T) {
	r := v1(t)
	url := serve(t, r.dir)
	u := newUser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	b, err := u.command(ctx, nil, "sh", installScript(), "--base-url", url, "--allowed-signers", r.signers).CombinedOutput()
	out := must(t)(b, err)
	t.Logf("install.sh took %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	for _, want := range []string{
		"signature of checksums.txt: good",
		"betcode-agent_v9.1.0_linux_amd64.tar.gz: SHA-256 matches checksums.txt",
		"installed betcode-agent and betcode v9.1.0 into " + filepath.Join(u.home, ".local", "bin"),
		"is not on your PATH",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("install.sh's output lacks %q", want)
		}
	}
	for bin, want := range map[string]string{"betcode-agent": "betcode-agent version v9.1.0", "betcode": "v9.1.0"} {
		b, err := u.command(ctx, nil, u.bin(bin), "--version").CombinedOutput()
		if got := must(t)(b, err); !strings.Contains(got, want) {
			t.Errorf("%s --version = %q, want %q", bin, got, want)
		}
		fi, err := os.Stat(u.bin(bin))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("%s has mode %v, want 0755", bin, fi.Mode().Perm())
		}
	}
	left, _ := filepath.Glob(filepath.Join(u.home, ".local", "bin", ".*"))
	if len(left) > 0 {
		t.Errorf("install.sh left temporary files: %v", left)
	}
}

// TestInstallRefuses serves broken releases: each is refused with a clear
// message and installs nothing.
func TestInstallRefuses(t *testing.T) {
	r := v1(t)
	u := newUser(t)
	otherKey := filepath.Join(base, "other-key")
	line, err := release.DevKey(context.Background(), otherKey)
	if err != nil {
		t.Fatal(err)
	}
	otherSigners := filepath.Join(base, "other_signers")
	if err := os.WriteFile(otherSigners, line, 0o644); err != nil {
		t.Fatal(err)
	}
	agentArchive := "betcode-agent_v9.1.0_linux_amd64.tar.gz"
	for _, tc := range []struct {
		name    string
		tamper  func(dir string) // changes a copy of the release
		signers string           // "" = the release key embedded in install.sh
		want    string
	}{
		{name: "tampered archive", signers: r.signers, want: "REFUSED: " + agentArchive + "'s SHA-256",
			tamper: func(dir string) {
				p := filepath.Join(dir, agentArchive)
				b, _ := os.ReadFile(p)
				b[len(b)/2] ^= 0xff
				os.Remove(p)
				os.WriteFile(p, b, 0o644)
			}},
		{name: "tampered checksums", signers: r.signers, want: "REFUSED: the signature of checksums.txt does not verify",
			tamper: func(dir string) {
				p := filepath.Join(dir, "checksums.txt")
				b, _ := os.ReadFile(p)
				os.Remove(p)
				os.WriteFile(p, bytes.Replace(b, []byte("0"), []byte("1"), 1), 0o644)
			}},
		{name: "signed by another key", signers: otherSigners, want: "REFUSED: the signature of checksums.txt does not verify"},
		{name: "not the release key", want: "REFUSED: the signature of checksums.txt does not verify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := linkRelease(t, r.dir, strings.ReplaceAll(tc.name, " ", "-"))
			if tc.tamper != nil {
				tc.tamper(dir)
			}
			url := serve(t, dir)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			args := []string{installScript(), "--base-url", url}
			if tc.signers != "" {
				args = append(args, "--allowed-signers", tc.signers)
			}
			out, err := u.command(ctx, nil, "sh", args...).CombinedOutput()
			if err == nil {
				t.Fatalf("install.sh installed a %s:\n%s", tc.name, out)
			}
			if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "nothing was installed") {
				t.Errorf("install.sh's message lacks %q and \"nothing was installed\":\n%s", tc.want, out)
			}
			if ents, _ := os.ReadDir(filepath.Join(u.home, ".local", "bin")); len(ents) > 0 {
				t.Errorf("a refused install left files in ~/.local/bin: %v", ents)
			}
		})
	}
}

// linkRelease makes a copy of a release directory of symbolic links, whose
// files a test may replace.
func linkRelease(t *testing.T, src, name string) string {
	t.Helper()
	dir := filepath.Join(base, "release-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestScriptCarriesTheReleaseKey: install.sh's embedded allowed signers are
// shared/release/allowed_signers's.
func TestScriptCarriesTheReleaseKey(t *testing.T) {
	script, err := os.ReadFile(installScript())
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^RELEASE_SIGNERS='([^']*)'$`).FindSubmatch(script)
	if m == nil {
		t.Fatal("scripts/install.sh has no RELEASE_SIGNERS='...' line")
	}
	var want string
	for _, l := range strings.Split(string(release.AllowedSigners), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			want = l
		}
	}
	if string(m[1]) != want {
		t.Errorf("install.sh trusts\n  %s\nshared/release/allowed_signers has\n  %s", m[1], want)
	}
}
