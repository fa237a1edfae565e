package codex

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/betcode-dev/betcode/shared/pinned"
)

// BinaryEnv overrides where FindBinary looks: the path of a native codex
// executable.
const BinaryEnv = "BETCODE_CODEX_BIN"

// ErrNotInstalled is returned by FindBinary when the pinned Codex is not
// installed.
var ErrNotInstalled = errors.New("codex CLI not installed (run make codex)")

// platform returns the npm platform package suffix and Rust target triple
// of the native binary for this machine.
func platform() (pkg, triple string, ok bool) {
	switch runtime.GOOS + "/" + runtime.GOARCH {
	case "linux/amd64":
		return "linux-x64", "x86_64-unknown-linux-musl", true
	case "linux/arm64":
		return "linux-arm64", "aarch64-unknown-linux-musl", true
	case "darwin/amd64":
		return "darwin-x64", "x86_64-apple-darwin", true
	case "darwin/arm64":
		return "darwin-arm64", "aarch64-apple-darwin", true
	}
	return "", "", false
}

// InstallDir returns where scripts/install-codex.sh installs version:
// $XDG_CACHE_HOME/betcode/codex-<version> (default ~/.cache/...).
func InstallDir(version string) (string, error) {
	return pinned.Dir("codex", version)
}

// BinaryIn returns the native binary's path inside an npm prefix where
// @openai/codex is installed: the platform package's
// vendor/<triple>/bin/codex, which the package's Node shim would exec.
func BinaryIn(prefix string) (string, error) {
	pkg, triple, ok := platform()
	if !ok {
		return "", fmt.Errorf("no Codex build for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	return filepath.Join(prefix, "node_modules", "@openai", "codex-"+pkg, "vendor", triple, "bin", "codex"), nil
}

// FindBinary returns the native codex executable: $BETCODE_CODEX_BIN if
// set, else the pinned version installed by scripts/install-codex.sh. It
// returns an error wrapping ErrNotInstalled when there is none.
func FindBinary() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		if err := pinned.Executable(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", BinaryEnv, p, err)
		}
		return p, nil
	}
	dir, err := InstallDir(PinnedVersion)
	if err != nil {
		return "", err
	}
	p, err := BinaryIn(dir)
	if err != nil {
		return "", err
	}
	if err := pinned.Executable(p); err != nil {
		return "", fmt.Errorf("codex %s at %s: %w", PinnedVersion, p, ErrNotInstalled)
	}
	return p, nil
}
