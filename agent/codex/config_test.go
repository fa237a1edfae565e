package codex

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{Binary: "/x/codex", Home: "/h", BaseURL: "http://127.0.0.1:1/v1"}
	tests := []struct {
		name    string
		mod     func(*Config)
		wantErr string
	}{
		{name: "ok", mod: func(*Config) {}},
		{name: "no binary", mod: func(c *Config) { c.Binary = "" }, wantErr: "make codex"},
		{name: "no home", mod: func(c *Config) { c.Home = "" }, wantErr: "CODEX_HOME"},
		{name: "no url", mod: func(c *Config) { c.BaseURL = "" }, wantErr: "base URL"},
		{name: "bad url", mod: func(c *Config) { c.BaseURL = "ftp://x" }, wantErr: "not http"},
		{name: "bad policy", mod: func(c *Config) { c.ApprovalPolicy = "sometimes" }, wantErr: "approval policy"},
		{name: "bad sandbox", mod: func(c *Config) { c.Sandbox = "none" }, wantErr: "sandbox"},
		{name: "negative retries", mod: func(c *Config) { c.StreamMaxRetries = -1 }, wantErr: "retry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mod(&c)
			err := c.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestConfigTOML(t *testing.T) {
	c := Config{Binary: "b", Home: "h", BaseURL: "http://127.0.0.1:9/v1/", APIKey: "k", Model: `we"ird`, RequestMaxRetries: 1, StreamMaxRetries: 2}
	got := c.ConfigTOML()
	for _, want := range []string{
		`model = "we\"ird"`, `model_provider = "betcode"`, `[model_providers.betcode]`,
		`base_url = "http://127.0.0.1:9/v1"`, `env_key = "BETCODE_CODEX_API_KEY"`, `wire_api = "responses"`,
		`request_max_retries = 1`, `stream_max_retries = 2`, `supports_websockets = false`, "[features]\nplugins = false",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config.toml lacks %q:\n%s", want, got)
		}
	}
	c.APIKey = ""
	if strings.Contains(c.ConfigTOML(), "env_key") {
		t.Error("env_key without an API key")
	}
}

func TestEnviron(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "http://elsewhere")
	t.Setenv("CODEX_HOME", "/home/user/.codex")
	c := Config{Home: "/private", APIKey: "sk", Env: []string{"EXTRA=1"}}
	env := c.environ()
	for _, kv := range env {
		if strings.HasPrefix(kv, "OPENAI_") || kv == "CODEX_HOME=/home/user/.codex" {
			t.Errorf("environment keeps %s", kv)
		}
	}
	for _, want := range []string{"CODEX_HOME=/private", APIKeyEnv + "=sk", "EXTRA=1"} {
		if !slices.Contains(env, want) {
			t.Errorf("environment lacks %s", want)
		}
	}
}

func TestFindBinary(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "codex")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(BinaryEnv, exe)
	if got, err := FindBinary(); err != nil || got != exe {
		t.Errorf("FindBinary() = %q, %v with %s set", got, err, BinaryEnv)
	}
	t.Setenv(BinaryEnv, filepath.Join(dir, "missing"))
	if _, err := FindBinary(); err == nil {
		t.Error("FindBinary found a missing override")
	}
	t.Setenv(BinaryEnv, "")
	t.Setenv("XDG_CACHE_HOME", dir)
	if _, err := FindBinary(); err == nil || !strings.Contains(err.Error(), "make codex") {
		t.Errorf("FindBinary() with nothing installed: %v", err)
	}
	want, err := BinaryIn(filepath.Join(dir, "betcode", "codex-"+PinnedVersion))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(want), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(want, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := FindBinary(); err != nil || got != want {
		t.Errorf("FindBinary() = %q, %v; want the install-codex.sh layout %s", got, err, want)
	}
}
