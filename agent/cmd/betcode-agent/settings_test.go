package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/betcode-dev/betcode/agent/config"
)

// TestServeFlagsAreSettings keeps the flags and docs/configuration.md in
// step: a flag added to serve outside the settings table fails here.
func TestServeFlagsAreSettings(t *testing.T) {
	newServeCmd().Flags().VisitAll(func(f *pflag.Flag) {
		if _, ok := config.Lookup(f.Name); !ok {
			t.Errorf("serve flag --%s is not in agent/config's Keys (add it there; it renders docs/configuration.md)", f.Name)
		}
	})
}

func TestSettingsPrecedence(t *testing.T) {
	dataDir := t.TempDir()
	cfgFile := filepath.Join(t.TempDir(), "agent.yaml")
	write(t, cfgFile, `
model: from-config
permission-timeout: 1m
max-processes: 3
hang-timeout: 2m
deny: ["Bash(curl *)"]
permission_rules:
  - {id: r1, toolName: Bash, behavior: deny}
`)
	if err := config.WriteFile(config.SettingsPath(dataDir), map[string]any{
		"model": "from-settings", "permission-timeout": 2 * time.Minute, "auto-compact-tokens": uint64(100), "deny": []string{"Bash(rm *)"},
	}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BETCODE_PERMISSION_TIMEOUT", "3m")
	t.Setenv("BETCODE_MAX_PROCESSES", "5")
	t.Setenv("BETCODE_MODEL", "")
	t.Setenv("BETCODE_LOG_LEVEL", "")

	cmd := &cobra.Command{Use: "serve"}
	config.RegisterFlags(cmd.Flags(), map[string]any{"data-dir": dataDir})
	if err := cmd.Flags().Parse([]string{"--config", cfgFile, "--permission-timeout", "4m"}); err != nil {
		t.Fatal(err)
	}
	v := viper.New()
	if err := bindViper(cmd, v); err != nil {
		t.Fatal(err)
	}
	snap, err := loadSettings(cmd, v)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key    string
		want   any
		source config.Source
	}{
		{key: "log-level", want: "info", source: config.SourceDefault},
		{key: "hang-timeout", want: 2 * time.Minute, source: config.SourceConfigFile},
		{key: "model", want: "from-settings", source: config.SourceSettingsFile},
		{key: "deny", want: []string{"Bash(rm *)"}, source: config.SourceSettingsFile},
		{key: "auto-compact-tokens", want: uint64(100), source: config.SourceSettingsFile},
		{key: "max-processes", want: 5, source: config.SourceEnv},
		{key: "permission-timeout", want: 4 * time.Minute, source: config.SourceFlag},
		{key: "data-dir", want: dataDir, source: config.SourceDefault},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			got := snap.Settings[tc.key]
			if !reflect.DeepEqual(got.Value, tc.want) || got.Source != tc.source {
				t.Errorf("%s = %#v from %v, want %#v from %v", tc.key, got.Value, got.Source, tc.want, tc.source)
			}
			// What the daemon is given (from viper) is the same value.
			if !reflect.DeepEqual(viperValue(v, mustKey(t, tc.key)), tc.want) {
				t.Errorf("viper %s = %#v, want %#v", tc.key, viperValue(v, mustKey(t, tc.key)), tc.want)
			}
		})
	}
	if rules, _ := snap.Settings["permission_rules"].Value.([]any); len(rules) != 1 {
		t.Errorf("permission_rules = %#v, want the config file's rule", snap.Settings["permission_rules"].Value)
	}
	if snap.File != config.SettingsPath(dataDir) || len(snap.Stored) != 4 {
		t.Errorf("snapshot file %s with %d stored keys", snap.File, len(snap.Stored))
	}
}

func mustKey(t *testing.T, name string) config.Key {
	k, ok := config.Lookup(name)
	if !ok {
		t.Fatalf("no key %s", name)
	}
	return k
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
