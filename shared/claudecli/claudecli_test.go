package claudecli

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPath(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "claude")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	installed := filepath.Join(cache, "betcode", "claude-code-"+Version, "node_modules", ".bin", "claude")

	tests := []struct {
		name    string
		bin     string // BETCODE_CLAUDE_BIN
		install bool   // create the binary under XDG_CACHE_HOME
		want    string
		wantErr bool
	}{
		{name: "override", bin: bin, want: bin},
		{name: "override not executable", bin: plain, wantErr: true},
		{name: "override missing", bin: filepath.Join(dir, "nope"), wantErr: true},
		{name: "cache missing", wantErr: true},
		{name: "cache installed", install: true, want: installed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(BinEnv, tc.bin)
			t.Setenv("XDG_CACHE_HOME", cache)
			if tc.install {
				if err := os.MkdirAll(filepath.Dir(installed), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(installed, []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Remove(installed) })
			}
			got, err := Path()
			if tc.wantErr {
				if !errors.Is(err, ErrNotInstalled) {
					t.Fatalf("Path() error = %v, want ErrNotInstalled", err)
				}
				if !strings.Contains(err.Error(), "install-claude.sh") && tc.bin == "" {
					t.Errorf("error %q does not say how to install", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Path() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestEnv(t *testing.T) {
	env := Env("/h", "http://127.0.0.1:1")
	for _, want := range []string{"HOME=/h", "ANTHROPIC_BASE_URL=http://127.0.0.1:1", "ANTHROPIC_API_KEY=sk-test", "CLAUDE_CODE_MAX_RETRIES=2"} {
		if !slices.Contains(env, want) {
			t.Errorf("Env() lacks %q: %v", want, env)
		}
	}
}
