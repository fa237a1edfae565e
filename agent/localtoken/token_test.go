package localtoken

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadOrCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := Read(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read before any token: %v, want ErrNotExist", err)
	}
	tok, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != 64 {
		t.Fatalf("token has %d characters, want 64 hex digits", len(tok))
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, Path(dir): 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %04o, want %04o", p, fi.Mode().Perm(), want)
		}
	}
	again, err := LoadOrCreate(dir)
	if err != nil || again != tok {
		t.Fatalf("second LoadOrCreate made a new token (%v)", err)
	}
	if got, err := Read(dir); err != nil || got != tok {
		t.Fatalf("Read = %v, want the token", err)
	}
}

func TestReadRefuses(t *testing.T) {
	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		want    string
	}{
		{"readable by others", strings.Repeat("ab", 32), 0o644, "readable by others"},
		{"short", "abc", 0o600, "malformed"},
		{"not hex", strings.Repeat("zz", 32), 0o600, "malformed"},
		{"empty", "", 0o600, "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(Path(dir), []byte(tt.content), tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(Path(dir), tt.mode); err != nil {
				t.Fatal(err)
			}
			_, err := Read(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Read = %v, want an error mentioning %q", err, tt.want)
			}
			if tt.content != "" && strings.Contains(err.Error(), tt.content) {
				t.Fatalf("error %q shows the file's content", err)
			}
			if _, err := LoadOrCreate(dir); err == nil {
				t.Fatal("LoadOrCreate accepted the file")
			}
		})
	}
}
