// Package pinned locates the pinned, npm-installed tools BetCode drives
// (Claude Code, Codex, claude-agent-acp) where scripts/install-*.sh put
// them: one directory per tool and version under the user's cache.
package pinned

import (
	"fmt"
	"os"
	"path/filepath"
)

// Dir returns the directory version of tool is installed into:
// $XDG_CACHE_HOME/betcode/<tool>-<version>, or ~/.cache/... when
// XDG_CACHE_HOME is unset.
func Dir(tool, version string) (string, error) {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the cache directory: %w", err)
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "betcode", tool+"-"+version), nil
}

// Executable returns nil when p is a file with an execute bit, else why
// not.
func Executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}
