package installtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// freshUser is a Unix user made for one test with useradd, with an empty
// home of its own, as on a new machine.
type freshUser struct {
	name, home string
	uid, gid   uint32
}

// newUser creates a fresh user, removed (with its home) at the test's end.
// It needs root: CI runs as root; elsewhere the test is skipped, and fails
// under CI=true saying so.
func newUser(t *testing.T) freshUser {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test creates a fresh user with useradd: run it as root (CI does)")
		}
		t.Skip("needs root to create a fresh user with useradd (CI runs it as root)")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Fatal("useradd is missing: apt-get install passwd")
	}
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	name := "bcinst" + hex.EncodeToString(rnd[:])
	home := filepath.Join(base, name)
	if out, err := exec.Command("useradd", "--create-home", "--home-dir", home, "--shell", "/bin/sh", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", "--remove", name).CombinedOutput(); err != nil {
			t.Logf("userdel %s: %v: %s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	ents, _ := os.ReadDir(home)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") { // skel's dot files only
			t.Fatalf("the fresh home %s is not empty: %s", home, e.Name())
		}
	}
	return freshUser{name: name, home: home, uid: uint32(uid), gid: uint32(gid)}
}

// command runs name as the user, in its home, with a login's minimal
// environment plus env.
func (u freshUser) command(ctx context.Context, env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = u.home
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid}}
	cmd.Env = append([]string{"HOME=" + u.home, "USER=" + u.name, "LOGNAME=" + u.name,
		"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}, env...)
	return cmd
}

// bin is where install.sh puts the user's binaries by default.
func (u freshUser) bin(name string) string { return filepath.Join(u.home, ".local", "bin", name) }

// installScript is scripts/install.sh.
func installScript() string { return filepath.Join(repoRoot(), "scripts", "install.sh") }

// copyShared puts a file where every user can read it.
func copyShared(t *testing.T, src, name string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(base, name)
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// fakeClaude is a stand-in Claude Code CLI that answers --version only:
// the agent checks the CLI at start, and these tests start no session.
func fakeClaude(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(base, "claude-bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "claude")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho '2.1.328 (Claude Code)'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// must returns a command's output, failing the test with it on an error:
// must(t)(cmd.CombinedOutput()).
func must(t *testing.T) func([]byte, error) string {
	t.Helper()
	return func(out []byte, err error) string {
		t.Helper()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("%v\n%s%s", err, out, stderr)
		}
		return string(out)
	}
}

// sha is the hex SHA-256 of b.
func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
