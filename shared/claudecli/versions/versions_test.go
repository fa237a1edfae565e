package versions

import (
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want int
	}{
		{name: "equal", a: "2.1.328", b: "2.1.328", want: 0},
		{name: "patch older", a: "2.1.300", b: "2.1.328", want: -1},
		{name: "patch numeric not lexical", a: "2.1.9", b: "2.1.10", want: -1},
		{name: "minor wins over patch", a: "2.2.0", b: "2.1.999", want: 1},
		{name: "major wins", a: "10.0.0", b: "9.9.9", want: 1},
		{name: "leading v", a: "v2.1.328", b: "2.1.328", want: 0},
		{name: "build metadata ignored", a: "2.1.328+abc", b: "2.1.328", want: 0},
		{name: "prerelease before release", a: "2.1.328-beta", b: "2.1.328", want: -1},
		{name: "release after prerelease", a: "2.1.328", b: "2.1.328-rc.1", want: 1},
		{name: "prerelease numeric ids", a: "1.0.0-rc.2", b: "1.0.0-rc.10", want: -1},
		{name: "numeric id before alphanumeric", a: "1.0.0-1", b: "1.0.0-alpha", want: -1},
		{name: "alphanumeric ids lexical", a: "1.0.0-alpha", b: "1.0.0-beta", want: -1},
		{name: "longer prerelease newer", a: "1.0.0-alpha.1", b: "1.0.0-alpha", want: 1},
		{name: "invalid older than valid", a: "junk", b: "0.0.1", want: -1},
		{name: "valid newer than invalid", a: "0.0.1", b: "2.1", want: 1},
		{name: "both invalid", a: "x", b: "y", want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Compare(tc.a, tc.b); got != tc.want {
				t.Errorf("Compare(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
			}
			if got := Compare(tc.b, tc.a); got != -tc.want {
				t.Errorf("Compare(%q, %q) = %d, want %d (antisymmetry)", tc.b, tc.a, got, -tc.want)
			}
		})
	}
}

func TestValid(t *testing.T) {
	tests := []struct {
		v    string
		want bool
	}{
		{"2.1.328", true},
		{"v2.1.328", true},
		{"2.1.328-beta.1+build.5", true},
		{"0.0.0", true},
		{"", false},
		{"2.1", false},
		{"2.1.328.1", false},
		{"2.01.3", false},
		{"2.1.x", false},
		{"2.1.3-", false},
		{"2.1.3-a..b", false},
		{"2.1.328 (Claude Code)", false},
	}
	for _, tc := range tests {
		if got := Valid(tc.v); got != tc.want {
			t.Errorf("Valid(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

// The constants are read by scripts with sed and must stay sane.
func TestConstants(t *testing.T) {
	for _, v := range []string{Pinned, TestedMin, TestedMax} {
		if !Valid(v) || strings.ContainsAny(v, "-+v") {
			t.Errorf("%q is not a plain major.minor.patch release", v)
		}
	}
	if !InRange(Pinned) {
		t.Errorf("Pinned %s is outside TestedMin..TestedMax %s..%s", Pinned, TestedMin, TestedMax)
	}
}

func TestInRangeAndWarning(t *testing.T) {
	tests := []struct {
		name     string
		v        string
		in       bool
		contains []string // in the warning; none when in range
	}{
		{name: "pinned", v: Pinned, in: true},
		{name: "oldest tested", v: TestedMin, in: true},
		{name: "newest tested", v: TestedMax, in: true},
		{name: "older", v: "2.0.0", contains: []string{"Claude Code 2.0.0 is outside the tested range " + TestedMin + "–" + TestedMax, "older", "upgrade"}},
		{name: "newer", v: "9.0.0", contains: []string{"Claude Code 9.0.0 is outside the tested range " + TestedMin + "–" + TestedMax, "newer", Pinned}},
		{name: "prerelease of oldest", v: TestedMin + "-beta", contains: []string{"older"}},
		{name: "unparsable", v: "nightly", contains: []string{`"nightly"`, TestedMin}},
		{name: "empty", v: "", contains: []string{`""`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := InRange(tc.v); got != tc.in {
				t.Errorf("InRange(%q) = %v, want %v", tc.v, got, tc.in)
			}
			w := Warning(tc.v)
			if tc.in != (w == "") {
				t.Fatalf("Warning(%q) = %q; in range %v", tc.v, w, tc.in)
			}
			for _, s := range tc.contains {
				if !strings.Contains(w, s) {
					t.Errorf("Warning(%q) = %q, lacks %q", tc.v, w, s)
				}
			}
		})
	}
}
