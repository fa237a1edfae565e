package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/betcode-dev/betcode/agent/config"
)

// loadSettings adds the settings file that ConfigService writes
// (<data-dir>/settings.json) to v, above the --config file and below the
// environment and the flags, and returns every setting in effect with its
// source.
func loadSettings(cmd *cobra.Command, v *viper.Viper) (*config.Snapshot, error) {
	inConfig := make(map[string]bool, len(config.Keys))
	for _, k := range config.Keys {
		inConfig[k.Name] = v.InConfig(k.Name)
	}
	file := config.SettingsPath(v.GetString("data-dir"))
	stored, err := config.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if len(stored) > 0 {
		if err := v.MergeConfigMap(stored); err != nil {
			return nil, fmt.Errorf("settings file %s: %w", file, err)
		}
	}
	snap := &config.Snapshot{Settings: make(map[string]config.Setting, len(config.Keys)), File: file, Stored: stored}
	for _, k := range config.Keys {
		src := config.SourceDefault
		_, isStored := stored[k.Name]
		switch {
		case !k.NoFlag && cmd.Flags().Changed(k.Name):
			src = config.SourceFlag
		case k.Env() != "" && os.Getenv(k.Env()) != "":
			src = config.SourceEnv
		case isStored:
			src = config.SourceSettingsFile
		case inConfig[k.Name]:
			src = config.SourceConfigFile
		}
		snap.Settings[k.Name] = config.Setting{Value: viperValue(v, k), Source: src}
	}
	return snap, nil
}

// viperValue is k's value in effect, of the key's Go type.
func viperValue(v *viper.Viper, k config.Key) any {
	switch k.Kind {
	case config.String:
		return v.GetString(k.Name)
	case config.StringList:
		return v.GetStringSlice(k.Name)
	case config.Duration:
		return v.GetDuration(k.Name)
	case config.Int:
		return v.GetInt(k.Name)
	case config.Uint:
		return v.GetUint64(k.Name)
	case config.Bool:
		return v.GetBool(k.Name)
	}
	l, _ := v.Get(k.Name).([]any)
	return l
}
