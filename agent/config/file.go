package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/betcode-dev/betcode/agent/internal/atomicfile"
)

// SettingsFile is the name, in the data directory, of the file
// ConfigService's UpdateSettings writes.
const SettingsFile = "settings.json"

// SettingsPath returns the settings file of a data directory.
func SettingsPath(dataDir string) string { return filepath.Join(dataDir, SettingsFile) }

// ReadFile reads a settings file: a JSON object of keys to values, each
// parsed and validated (values of the keys' Go types). A missing file is no
// settings.
func ReadFile(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read settings file: %w", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("settings file %s: %w", path, err)
	}
	out := make(map[string]any, len(raw))
	for k, r := range raw {
		v, err := Parse(k, r)
		if err != nil {
			return nil, fmt.Errorf("settings file %s: %w", path, err)
		}
		out[k] = v
	}
	return out, nil
}

// WriteFile replaces the settings file with values (of the keys' Go types),
// atomically and with mode 0600.
func WriteFile(path string, values map[string]any) error {
	raw := make(map[string]any, len(values))
	for _, k := range slices.Sorted(maps.Keys(values)) {
		raw[k] = JSON(values[k])
	}
	b, err := json.MarshalIndent(raw, "", "  ")
	if err != nil {
		return fmt.Errorf("encode settings: %w", err)
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write settings file: %w", err)
	}
	return nil
}
