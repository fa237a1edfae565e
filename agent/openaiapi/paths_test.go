package openaiapi

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	outside := t.TempDir()
	base := t.TempDir()
	// The working directory is reached through a symlink, as /tmp is on
	// some systems: paths through either name are inside.
	realDir := filepath.Join(base, "real")
	dir := filepath.Join(base, "link")
	must(t, os.Mkdir(realDir, 0o755))
	must(t, os.Symlink(realDir, dir))
	must(t, os.WriteFile(filepath.Join(realDir, "a.txt"), []byte("a"), 0o644))
	must(t, os.Mkdir(filepath.Join(realDir, "sub"), 0o755))
	must(t, os.Symlink(outside, filepath.Join(realDir, "out")))
	must(t, os.Symlink("sub", filepath.Join(realDir, "in")))
	must(t, os.Symlink(filepath.Join(outside, "new.txt"), filepath.Join(realDir, "dangling")))
	w, err := openWorkdir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.close() })

	tests := []struct {
		path, want string // want "" = outside
	}{
		{"a.txt", "a.txt"},
		{".", "."},
		{"sub/../a.txt", "a.txt"},
		{"new/deep/file.txt", "new/deep/file.txt"},
		{filepath.Join(dir, "a.txt"), "a.txt"},
		{filepath.Join(realDir, "a.txt"), "a.txt"},
		{"in/x.txt", "sub/x.txt"},
		{"../a.txt", ""},
		{"sub/../../a.txt", ""},
		{"/etc/passwd", ""},
		{"out", ""},
		{"out/secret.txt", ""},
		{filepath.Join(outside, "x"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			got, err := w.resolve(tc.path)
			switch {
			case tc.want == "" && !errors.Is(err, errOutside):
				t.Errorf("resolve = %q, %v; want outside", got, err)
			case tc.want != "" && (err != nil || got != tc.want):
				t.Errorf("resolve = %q, %v; want %q", got, err, tc.want)
			}
		})
	}

	// A dangling symlink passes the check (its target does not exist) but
	// the write through the root is refused.
	if _, err := w.write(&toolInput{FilePath: "dangling", Content: "x"}); err == nil {
		t.Error("write through a dangling symlink to outside succeeded")
	}
	wantNoFile(t, filepath.Join(outside, "new.txt"))
	for _, p := range []string{"", "a\x00b"} {
		if _, err := w.resolve(p); err == nil {
			t.Errorf("resolve(%q) succeeded", p)
		}
	}
}

func TestFileToolErrors(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "bin"), []byte("a\x00b"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "twice.txt"), []byte("x x"), 0o644))
	w, err := openWorkdir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.close() })
	tests := []struct {
		name string
		run  func() (string, error)
		want string
	}{
		{"read binary", func() (string, error) { return w.read(&toolInput{FilePath: "bin"}) }, "binary file"},
		{"read missing", func() (string, error) { return w.read(&toolInput{FilePath: "nope"}) }, "no such file"},
		{"read a directory", func() (string, error) { return w.read(&toolInput{FilePath: "."}) }, "is a directory"},
		{"edit ambiguous", func() (string, error) {
			return w.edit(&toolInput{FilePath: "twice.txt", OldString: "x", NewString: "y"})
		}, "occurs 2 times"},
		{"grep bad pattern", func() (string, error) { return w.grep(&toolInput{Pattern: "("}) }, "bad pattern"},
		{"ls a file", func() (string, error) { return w.list(&toolInput{Path: "twice.txt"}) }, "not a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.run()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("= %q, %v; want an error with %q", out, err, tc.want)
			}
		})
	}
	if out, err := w.edit(&toolInput{FilePath: "twice.txt", OldString: "x", NewString: "y", ReplaceAll: true}); err != nil {
		t.Errorf("replace_all: %q, %v", out, err)
	}
	wantFile(t, filepath.Join(dir, "twice.txt"), "y y")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
