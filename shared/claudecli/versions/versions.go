// Package versions names the Claude Code releases BetCode is tested against
// and compares release numbers. It is a leaf, so the agent daemon can check
// the CLI it found without linking package claudecli's test helpers.
//
// scripts/install-claude.sh and scripts/compat.sh read the three constants
// below with sed: keep each on one line as `Name = "x.y.z"`. make test runs
// the end-to-end suites against Pinned; make compat runs them against
// TestedMin, Pinned and the newest release on npm, and docs/compat.md records
// what passed. Move TestedMin or TestedMax only with a compat run showing the
// suites pass on the new bound.
package versions

import (
	"fmt"
	"strconv"
	"strings"
)

const (
	// Pinned is the @anthropic-ai/claude-code release make test runs against.
	Pinned = "2.1.328"
	// TestedMin is the oldest release the end-to-end suites pass on: the
	// oldest BetCode supports.
	TestedMin = "2.1.302"
	// TestedMax is the newest release the end-to-end suites pass on.
	TestedMax = "2.1.331"
)

// version is a parsed semantic version; build metadata is dropped because
// it does not take part in precedence.
type version struct {
	core [3]uint64
	pre  []string // dot-separated prerelease identifiers; nil for a release
}

func parse(s string) (version, error) {
	var v version
	rest, _, _ := strings.Cut(strings.TrimPrefix(s, "v"), "+")
	rest, pre, hasPre := strings.Cut(rest, "-")
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return v, fmt.Errorf("version %q: want major.minor.patch", s)
	}
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil || (len(p) > 1 && p[0] == '0') {
			return v, fmt.Errorf("version %q: %q is not a number", s, p)
		}
		v.core[i] = n
	}
	if hasPre {
		v.pre = strings.Split(pre, ".")
		for _, id := range v.pre {
			if id == "" {
				return v, fmt.Errorf("version %q: empty prerelease identifier", s)
			}
		}
	}
	return v, nil
}

// Valid reports whether s is a version Compare understands:
// major.minor.patch with optional -prerelease and +build, and an optional
// leading "v".
func Valid(s string) bool {
	_, err := parse(s)
	return err == nil
}

// Compare returns -1, 0 or +1 as a is older than, the same release as, or
// newer than b, by semantic-versioning precedence (2.1.9 < 2.1.10,
// 2.1.0-beta < 2.1.0). An invalid version is older than every valid one, and
// two invalid ones compare equal.
func Compare(a, b string) int {
	va, errA := parse(a)
	vb, errB := parse(b)
	switch {
	case errA != nil && errB != nil:
		return 0
	case errA != nil:
		return -1
	case errB != nil:
		return 1
	}
	for i := range va.core {
		if c := cmpUint(va.core[i], vb.core[i]); c != 0 {
			return c
		}
	}
	return comparePre(va.pre, vb.pre)
}

func comparePre(a, b []string) int {
	switch {
	case len(a) == 0 && len(b) == 0:
		return 0
	case len(a) == 0:
		return 1 // a release is newer than its prereleases
	case len(b) == 0:
		return -1
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		na, errA := strconv.ParseUint(a[i], 10, 64)
		nb, errB := strconv.ParseUint(b[i], 10, 64)
		var c int
		switch {
		case errA == nil && errB == nil:
			c = cmpUint(na, nb)
		case errA == nil:
			c = -1 // numeric identifiers sort before alphanumeric ones
		case errB == nil:
			c = 1
		default:
			c = strings.Compare(a[i], b[i])
		}
		if c != 0 {
			return c
		}
	}
	return cmpUint(uint64(len(a)), uint64(len(b)))
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// InRange reports whether v lies within TestedMin..TestedMax, bounds
// included. An invalid version is not in range.
func InRange(v string) bool {
	return Valid(v) && Compare(v, TestedMin) >= 0 && Compare(v, TestedMax) <= 0
}

// Warning returns what the agent logs when it finds Claude Code v at start:
// nothing when v is within the tested range, else a sentence naming the
// range and what to do.
func Warning(v string) string {
	switch {
	case InRange(v):
		return ""
	case !Valid(v):
		return fmt.Sprintf("Claude Code version %q is not a version BetCode understands; it is tested with %s–%s (pinned %s), and sessions may misbehave", v, TestedMin, TestedMax, Pinned)
	case Compare(v, TestedMin) < 0:
		return fmt.Sprintf("Claude Code %s is outside the tested range %s–%s; it is older than BetCode supports and may lack parts of the protocol it relies on, such as permission requests: upgrade it (npm install -g @anthropic-ai/claude-code@%s)", v, TestedMin, TestedMax, Pinned)
	default:
		return fmt.Sprintf("Claude Code %s is outside the tested range %s–%s; it is newer than BetCode has been tested with and its stream-json protocol may have changed: if sessions misbehave, install %s (npm install -g @anthropic-ai/claude-code@%s)", v, TestedMin, TestedMax, Pinned, Pinned)
	}
}
