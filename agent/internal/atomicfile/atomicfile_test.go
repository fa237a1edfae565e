package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	for _, content := range []string{"one", "two, longer"} {
		if err := Write(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
		fi, _ := os.Stat(p)
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := Create(p, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Create(p, []byte("second"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second Create: %v, want ErrExist", err)
	}
	got, _ := os.ReadFile(p)
	if string(got) != "first" {
		t.Fatalf("file holds %q, want the first content", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

func TestJSON(t *testing.T) {
	dir := t.TempDir()
	type rec struct{ Name string }
	p := filepath.Join(dir, "recs.json")
	keep := []rec{{"kept"}}
	if err := ReadJSON(p, &keep); err != nil || len(keep) != 1 {
		t.Fatalf("a missing file: %v, %v; want no error and the value untouched", keep, err)
	}
	want := []rec{{"a"}, {"b"}}
	if err := WriteJSON(p, want, 0o600); err != nil {
		t.Fatal(err)
	}
	var got []rec
	if err := ReadJSON(p, &got); err != nil || len(got) != 2 || got[1].Name != "b" {
		t.Fatalf("read back %v, %v; want %v", got, err, want)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	if err := os.WriteFile(p, []byte("{half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ReadJSON(p, &got); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("a torn file: %v, want an error naming %s", err, p)
	}
}
