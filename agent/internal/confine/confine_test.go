package confine

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRel(t *testing.T) {
	for _, tc := range []struct {
		dir, p, rel string
		ok          bool
	}{
		{"/w", "/w", ".", true},
		{"/w", "/w/a/b", "a/b", true},
		{"/w", "/w/..a", "..a", true},
		{"/w", "/", "", false},
		{"/w", "/wx", "", false},
		{"/w", "/w/../x", "", false},
		{"/w", "relative", "", false},
	} {
		rel, ok := Rel(tc.dir, tc.p)
		if rel != tc.rel || ok != tc.ok {
			t.Errorf("Rel(%q, %q) = %q, %v; want %q, %v", tc.dir, tc.p, rel, ok, tc.rel, tc.ok)
		}
	}
}

// ResolveExisting resolves a symlink in the existing part of a path, keeps
// the missing rest, and so shows where a new file would really land.
func TestResolveExisting(t *testing.T) {
	root := t.TempDir()
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	realOutside, err := filepath.EvalSymlinks(outside)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ p, want string }{
		{filepath.Join(root, "sub"), filepath.Join(real, "sub")},
		{filepath.Join(root, "sub", "new", "file"), filepath.Join(real, "sub", "new", "file")},
		{filepath.Join(root, "escape", "new"), filepath.Join(realOutside, "new")},
	} {
		got, err := ResolveExisting(tc.p)
		if err != nil || got != tc.want {
			t.Errorf("ResolveExisting(%s) = %q, %v; want %q", tc.p, got, err, tc.want)
		}
		if _, in := Rel(real, got); in == (tc.want == filepath.Join(realOutside, "new")) {
			t.Errorf("Rel(%s, %s) = %v", real, got, in)
		}
	}
}
