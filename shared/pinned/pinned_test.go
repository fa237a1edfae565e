package pinned

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/c")
	if d, err := Dir("codex", "1.2.3"); err != nil || d != "/c/betcode/codex-1.2.3" {
		t.Fatalf("Dir = %q, %v", d, err)
	}
	home := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", home)
	if d, err := Dir("acp", "0.1.0"); err != nil || d != filepath.Join(home, ".cache", "betcode", "acp-0.1.0") {
		t.Fatalf("Dir without XDG_CACHE_HOME = %q, %v", d, err)
	}
}

func TestExecutable(t *testing.T) {
	dir := t.TempDir()
	exe, plain := filepath.Join(dir, "exe"), filepath.Join(dir, "plain")
	if err := os.WriteFile(exe, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		ok   bool
	}{{exe, true}, {plain, false}, {dir, false}, {filepath.Join(dir, "missing"), false}} {
		if err := Executable(tc.path); (err == nil) != tc.ok {
			t.Errorf("Executable(%s) = %v, want ok %v", tc.path, err, tc.ok)
		}
	}
}
