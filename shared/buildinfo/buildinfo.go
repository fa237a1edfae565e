// Package buildinfo names the version of a BetCode binary: the one the
// build stamped (make build: -ldflags "-X main.version=..."), else the
// module version `go install <module>/cmd/<binary>@<version>` recorded in
// the binary, else Dev. Version strings and how they compare are described
// in docs/upgrading.md.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Dev is the version of a development build that carries no other: the
// release being developed, with a "-dev" pre-release suffix.
const Dev = "0.2.0-dev"

// Version returns stamped when the build set it, else the main module's
// version from the binary's build information (a go install of a tagged
// version: "v0.2.0", or a pseudo-version), else Dev.
func Version(stamped string) string {
	if s := strings.TrimSpace(stamped); s != "" {
		return s
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
	}
	return Dev
}

// The previous release: the N-1 compatibility and migration tests
// (relay/e2e/upgrade_test.go) build it from git, by its tag when the clone
// has tags and by its commit otherwise. Bump both when a release is tagged
// (docs/upgrading.md, "Releasing").
const (
	PreviousVersion = "v0.1.0"
	PreviousCommit  = "96c6d9a3eb293d3903f0ac25c75f99eecb7ac2fd"
)
