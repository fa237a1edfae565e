package buildinfo

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Semver is a version's major.minor.patch; pre-release and build suffixes
// do not count, so "v0.2.0-dev" is 0.2.0.
type Semver [3]int

// Parse reads "v1.2.3", "1.2", "0.2.0-dev", "v0.2.0-dev+669d2cc-dirty" or
// a Go pseudo-version "v0.2.1-0.20261206020000-669d2cc12345". It reports
// false for anything else ("dev", a bare git commit).
func Parse(s string) (Semver, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(s, "-+ "); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if s == "" || len(parts) > 3 {
		return Semver{}, false
	}
	var v Semver
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return Semver{}, false
		}
		v[i] = n
	}
	return v, true
}

// Less reports whether a is older than b.
func (a Semver) Less(b Semver) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// String is "v1.2.3".
func (a Semver) String() string { return fmt.Sprintf("v%d.%d.%d", a[0], a[1], a[2]) }

// commitish is what git describe --always prints without a tag: an
// abbreviated commit, maybe -dirty.
var commitish = regexp.MustCompile(`^g?[0-9a-f]{7,40}(-dirty)?$`)

// IsDev reports whether s is the version of a development build rather
// than of a release: "dev", "(devel)", a bare commit ("669d2cc-dirty"),
// a -dev pre-release ("0.2.0-dev", "v0.2.0-dev+669d2cc"), a git describe
// past a tag ("v0.1.0-5-g669d2cc") or a Go pseudo-version. Such versions
// are served without an "untested version" warning.
func IsDev(s string) bool {
	s = strings.TrimSpace(s)
	switch {
	case s == "dev" || s == "(devel)" || commitish.MatchString(s):
		return true
	case strings.Contains(s, "-dev"):
		return true
	}
	if _, ok := Parse(s); !ok {
		return false
	}
	pre, _, _ := strings.Cut(s, "+")
	_, suffix, found := strings.Cut(pre, "-")
	if !found {
		return false
	}
	// v0.1.0-5-g669d2cc[-dirty] (git describe) or
	// v0.2.1-0.20261206020000-669d2cc12345 (pseudo-version).
	return devSuffix.MatchString(suffix)
}

// devSuffix: git describe's "5-g669d2cc[-dirty]", or a pseudo-version's
// "[0.]20261206020000-669d2cc12345" or "rc.1.0.20261206020000-669d2cc12345".
var devSuffix = regexp.MustCompile(`^\d+-g[0-9a-f]{7,40}(-dirty)?$|^(0\.)?\d{14}-[0-9a-f]{12}$|^[0-9A-Za-z.]+\.0\.\d{14}-[0-9a-f]{12}$`)
