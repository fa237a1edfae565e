package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		raw     any
		want    any
		wantErr string // substring; "" = valid
	}{
		{name: "string", key: "model", raw: "claude-sonnet-4-5", want: "claude-sonnet-4-5"},
		{name: "empty model is Claude's default", key: "model", raw: "", want: ""},
		{name: "model with a space", key: "model", raw: "a b", wantErr: "spaces"},
		{name: "string of wrong type", key: "model", raw: 3.0, wantErr: "want a string, got a number"},
		{name: "duration", key: "permission-timeout", raw: "30s", want: 30 * time.Second},
		{name: "negative duration disables", key: "permission-timeout", raw: "-1s", want: -time.Second},
		{name: "bad duration", key: "permission-timeout", raw: "soon", wantErr: "want a duration"},
		{name: "duration as number", key: "hang-timeout", raw: 5.0, wantErr: "duration string"},
		{name: "negative renew check", key: "cert-renew-check", raw: "-1h", wantErr: "negative"},
		{name: "int", key: "max-processes", raw: 4.0, want: 4},
		{name: "int zero", key: "max-processes", raw: 0.0, wantErr: "at least 1"},
		{name: "int fraction", key: "max-processes", raw: 1.5, wantErr: "whole number"},
		{name: "uint", key: "auto-compact-tokens", raw: 150000.0, want: uint64(150000)},
		{name: "uint negative", key: "auto-compact-tokens", raw: -1.0, wantErr: "from 0"},
		{name: "rules", key: "deny", raw: []any{"Bash(rm *)", "Read(./.env)"}, want: []string{"Bash(rm *)", "Read(./.env)"}},
		{name: "bad rule", key: "allow", raw: []any{"Bash(ls)", "Bash(unclosed"}, wantErr: `[1] "Bash(unclosed"`},
		{name: "rule not a string", key: "ask", raw: []any{1.0}, wantErr: "[0]: want a string"},
		{name: "empty list", key: "allow", raw: []any{}, want: []string{}},
		{name: "null list", key: "allow", raw: nil, want: []string(nil)},
		{name: "listen", key: "listen", raw: []any{"unix:///run/a.sock", "127.0.0.1:7000"}, want: []string{"unix:///run/a.sock", "127.0.0.1:7000"}},
		{name: "listen relative unix", key: "listen", raw: []any{"unix://a.sock"}, wantErr: "absolute"},
		{name: "listen no port", key: "listen", raw: []any{"localhost"}, wantErr: "host:port"},
		{name: "log level", key: "log-level", raw: "debug", want: "debug"},
		{name: "bad log level", key: "log-level", raw: "loud", wantErr: "want debug"},
		{name: "claude-bin empty", key: "claude-bin", raw: "", wantErr: "empty"},
		{name: "relay", key: "relay", raw: "relay.example.com:8443", want: "relay.example.com:8443"},
		{name: "relay without port", key: "relay", raw: "relay.example.com", wantErr: "host:port"},
		{name: "unknown key", key: "colour", raw: "red", wantErr: "not a setting"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.key, tc.raw)
			if tc.wantErr != "" {
				var ke *KeyError
				if !errors.As(err, &ke) || ke.Key != tc.key || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse(%s, %v) = %v, %v; want a KeyError for %s containing %q", tc.key, tc.raw, got, err, tc.key, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse(%s, %v) = %#v, %v; want %#v", tc.key, tc.raw, got, err, tc.want)
			}
		})
	}
}

// Every default must itself be valid, and its JSON form must parse back.
func TestDefaultsParse(t *testing.T) {
	for _, k := range Keys {
		if k.ReadOnly != "" {
			continue
		}
		def := k.DefaultValue()
		got, err := Parse(k.Name, JSON(def))
		if err != nil {
			t.Errorf("%s: default %#v does not parse: %v", k.Name, def, err)
			continue
		}
		if k.Kind != StringList && !reflect.DeepEqual(got, def) {
			t.Errorf("%s: round trip %#v -> %#v", k.Name, def, got)
		}
	}
}

func TestKeysAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Keys {
		if seen[k.Name] {
			t.Errorf("key %s twice", k.Name)
		}
		seen[k.Name] = true
		if k.Usage == "" {
			t.Errorf("key %s has no usage", k.Name)
		}
	}
}

func TestRegisterFlags(t *testing.T) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	RegisterFlags(fs, map[string]any{"data-dir": "/var/lib/betcode"})
	for _, k := range Keys {
		f := fs.Lookup(k.Name)
		if k.NoFlag != (f == nil) {
			t.Errorf("%s: flag %v, NoFlag %v", k.Name, f, k.NoFlag)
		}
	}
	if got := fs.Lookup("data-dir").DefValue; got != "/var/lib/betcode" {
		t.Errorf("data-dir default = %q, want the machine's", got)
	}
	if got := fs.Lookup("permission-timeout").DefValue; got != "5m0s" {
		t.Errorf("permission-timeout default = %q", got)
	}
}

func TestSettingsFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), SettingsFile)
	got, err := ReadFile(path)
	if err != nil || len(got) != 0 {
		t.Fatalf("missing file: %v, %v; want no settings", got, err)
	}
	want := map[string]any{"model": "opus", "deny": []string{"Bash(rm *)"}, "permission-timeout": 30 * time.Second, "max-processes": 3, "auto-compact-tokens": uint64(9)}
	if err := WriteFile(path, want); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("settings file mode = %v, %v; want 0600", fi.Mode(), err)
	}
	got, err = ReadFile(path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadFile = %#v, %v; want %#v", got, err, want)
	}
	if err := os.WriteFile(path, []byte(`{"max-processes": 0}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path); err == nil || !strings.Contains(err.Error(), "max-processes") {
		t.Fatalf("invalid stored value: err = %v, want one naming max-processes", err)
	}
}

// TestDocsUpToDate fails when docs/configuration.md is not the rendering of
// Keys. Regenerate it with: go generate ./agent/config
func TestDocsUpToDate(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "configuration.md")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, Markdown()) {
		t.Fatalf("%s is out of date with agent/config/keys.go; regenerate it with: go generate ./agent/config", path)
	}
	for _, k := range Keys {
		if !bytes.Contains(got, []byte("| `"+k.Name+"` |")) {
			t.Errorf("%s does not document %s", path, k.Name)
		}
	}
}
