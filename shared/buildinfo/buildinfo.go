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
