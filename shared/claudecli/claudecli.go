// Package claudecli locates the pinned Claude Code CLI that tests and demos
// run against the fake Messages API of package fakeapi.
//
// The CLI is installed by scripts/install-claude.sh (make claude) into
// $XDG_CACHE_HOME/betcode/claude-code-<Version> (default ~/.cache/...).
package claudecli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/betcode-dev/betcode/shared/pinned"

	"github.com/betcode-dev/betcode/shared/claudecli/versions"
)

// Version is the pinned @anthropic-ai/claude-code release: versions.Pinned.
const Version = versions.Pinned

// BinEnv names the environment variable that, when set, overrides where the
// CLI is looked for.
const BinEnv = "BETCODE_CLAUDE_BIN"

// ErrNotInstalled is returned by Path when the CLI cannot be found.
var ErrNotInstalled = errors.New("claude code cli not installed")

// InstallDir returns the directory the pinned CLI is installed into:
// $XDG_CACHE_HOME/betcode/claude-code-<Version>, or ~/.cache/... when
// XDG_CACHE_HOME is unset.
func InstallDir() (string, error) {
	return pinned.Dir("claude-code", Version)
}

// Path returns the CLI executable: $BETCODE_CLAUDE_BIN if set, else
// InstallDir()/node_modules/.bin/claude. The error wraps ErrNotInstalled and
// says how to install it.
func Path() (string, error) {
	if p := os.Getenv(BinEnv); p != "" {
		if err := pinned.Executable(p); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %v", ErrNotInstalled, BinEnv, p, err)
		}
		return p, nil
	}
	dir, err := InstallDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "node_modules", ".bin", "claude")
	if err := pinned.Executable(p); err != nil {
		return "", fmt.Errorf("%w: @anthropic-ai/claude-code@%s: %v; run `make claude` or scripts/install-claude.sh (needs npm)",
			ErrNotInstalled, Version, err)
	}
	return p, nil
}

// Env returns the environment for running the CLI offline against a fake
// API at baseURL with the given HOME: an API key, no telemetry or other
// network traffic, and two API retries so error scripts end fast. Append it
// to a minimal base such as PATH; the CLI does not need the caller's
// environment.
func Env(home, baseURL string) []string {
	return []string{
		"HOME=" + home,
		"ANTHROPIC_BASE_URL=" + baseURL,
		"ANTHROPIC_API_KEY=sk-test",
		"DISABLE_TELEMETRY=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_MAX_RETRIES=2",
	}
}

// Args returns the command line flags of a stream-json session with
// permission prompts on stdio and partial messages, as the agent uses them.
// extra (e.g. "--model", "M", "--resume", "ID") is appended.
func Args(extra ...string) []string {
	return append([]string{
		"-p",
		"--input-format", "stream-json",
		"--output-format", "stream-json",
		"--verbose",
		"--include-partial-messages",
		"--permission-prompt-tool", "stdio",
	}, extra...)
}
