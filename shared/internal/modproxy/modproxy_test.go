package modproxy

import (
	"archive/zip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAddWorkingTree: a module from the working tree lands in the layout
// the GOPROXY protocol names, its zip holding the module's files under
// path@version/.
func TestAddWorkingTree(t *testing.T) {
	repo := t.TempDir()
	mustWrite(t, filepath.Join(repo, "m", "go.mod"), "module example.com/m\n\ngo 1.26\n")
	mustWrite(t, filepath.Join(repo, "m", "m.go"), "// Package m is a test module.\npackage m\n")
	p := &Proxy{Dir: t.TempDir(), Repo: repo}
	path, err := p.Add(t.Context(), Module{Dir: "m", Version: "v1.2.3"})
	if err != nil || path != "example.com/m" {
		t.Fatalf("Add = %q, %v; want example.com/m", path, err)
	}
	dir := filepath.Join(p.Dir, "example.com", "m", "@v")
	list, err := os.ReadFile(filepath.Join(dir, "list"))
	if err != nil || string(list) != "v1.2.3\n" {
		t.Fatalf("list = %q, %v", list, err)
	}
	for _, f := range []string{"v1.2.3.info", "v1.2.3.mod"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	zr, err := zip.OpenReader(filepath.Join(dir, "v1.2.3.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	if want := []string{"example.com/m@v1.2.3/go.mod", "example.com/m@v1.2.3/m.go"}; !slices.Equal(names, want) {
		t.Fatalf("zip holds %v, want %v", names, want)
	}
	if !strings.HasPrefix(p.URL(), "file:///") {
		t.Fatalf("URL = %q", p.URL())
	}
	if _, err := p.Add(t.Context(), Module{Dir: "m", Version: "1.2.3"}); err == nil {
		t.Fatal("Add accepted version 1.2.3 (no v)")
	}
}

func mustWrite(t *testing.T, name, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
