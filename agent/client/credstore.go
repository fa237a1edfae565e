package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/betcode-dev/betcode/agent/internal/atomicfile"
)

// Credentials are what `betcode login` stores: the relay, the CA to trust
// for it, the client token and whose it is.
type Credentials struct {
	Relay   string `json:"relay"`
	RelayCA string `json:"relay_ca,omitempty"` // absolute path; empty: the system roots
	Token   string `json:"token"`
	User    string `json:"user"`
}

// CredentialsPath is $XDG_CONFIG_HOME/betcode/credentials.json, or
// ~/.config/betcode/credentials.json.
func CredentialsPath() (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the credentials file: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "betcode", "credentials.json"), nil
}

// LoadCredentials reads the credentials at path; the error wraps
// fs.ErrNotExist when nobody logged in.
func LoadCredentials(path string) (*Credentials, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read credentials: %w", err)
	}
	var c Credentials
	if err := json.Unmarshal(b, &c); err != nil {
		// The decoder's error may quote the file, and the file holds the
		// token: say only where it is.
		return nil, fmt.Errorf("credentials file %s is not valid JSON: log in again, or run betcode logout", path)
	}
	if c.Relay == "" || c.Token == "" {
		return nil, fmt.Errorf("credentials file %s has no relay or token: log in again, or run betcode logout", path)
	}
	return &c, nil
}

// Save writes c to path (directory 0700, file 0600), atomically: a reader
// sees the old file or the new one.
func (c *Credentials) Save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	return nil
}

// RemoveCredentials deletes the credentials at path; removed is false when
// there were none.
func RemoveCredentials(path string) (removed bool, err error) {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("remove credentials: %w", err)
	}
	return true, nil
}
