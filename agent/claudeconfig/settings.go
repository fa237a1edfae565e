package claudeconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Scope is a layer of Claude Code's configuration.
type Scope int

// Claude Code's scopes.
const (
	User    Scope = iota + 1 // this user, every project
	Project                  // checked into the project
	Local                    // this user, one project
)

// Permissions are Claude Code permission rules.
type Permissions struct {
	Allow       []string `json:"allow,omitempty"`
	Deny        []string `json:"deny,omitempty"`
	Ask         []string `json:"ask,omitempty"`
	DefaultMode string   `json:"defaultMode,omitempty"`
}

// Settings is one Claude Code settings file.
type Settings struct {
	Model       string            `json:"model,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Permissions Permissions       `json:"permissions"`

	EnabledMcpjsonServers  []string `json:"enabledMcpjsonServers,omitempty"`
	DisabledMcpjsonServers []string `json:"disabledMcpjsonServers,omitempty"`

	// Raw is the whole file, for the keys not modelled above.
	Raw map[string]any `json:"-"`
}

// SettingsPath returns the settings file of a scope; dir is the project
// (ignored for User).
func SettingsPath(home, dir string, s Scope) string {
	switch s {
	case Project:
		return filepath.Join(dir, ".claude", "settings.json")
	case Local:
		return filepath.Join(dir, ".claude", "settings.local.json")
	}
	return filepath.Join(home, ".claude", "settings.json")
}

// ReadSettings reads the settings file of a scope; a missing file is empty
// settings.
func ReadSettings(home, dir string, s Scope) (Settings, error) {
	var out Settings
	path := SettingsPath(home, dir, s)
	ok, err := readJSON(path, &out)
	if err != nil || !ok {
		return out, err
	}
	_, err = readJSON(path, &out.Raw)
	return out, err
}

// readJSON decodes a JSON file into v; it reports false, and no error, when
// the file does not exist.
func readJSON(path string, v any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("parse %s: %w", path, err)
	}
	return true, nil
}
