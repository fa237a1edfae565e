package permission

import (
	"strings"
	"testing"
)

func TestClaudePath(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"*.md", testCwd + "/a.md", true},
		{"*.md", testCwd + "/x/y/a.md", true},
		{"*.md", testCwd + "/a.md/inner", true}, // a directory named a.md
		{"*.md", "/elsewhere/a.md", false},
		{"*.md", testCwd, false},
		{"src", testCwd + "/src", true},
		{"src", testCwd + "/a/src/b", true},
		{"src/", testCwd + "/a/src/b", true},
		{"src/*.go", testCwd + "/src/a.go", true},
		{"src/*.go", testCwd + "/src/x/a.go", false},
		{"src/*.go", testCwd + "/x/src/a.go", false},
		{"src/**/*.go", testCwd + "/src/a.go", true},
		{"src/**/*.go", testCwd + "/src/x/y/a.go", true},
		{"**/test/**", testCwd + "/a/test/b", true},
		{"**/test/**", testCwd + "/test", true},
		{"**", testCwd + "/anything", true},
		{"**", "/outside", false},
		{"/", testCwd, true},
		{"/", testCwd + "/x", true},
		{"/", testCwd + "x", false},
		{".", testCwd + "/x", true},
		{"./a", testCwd + "/a", true},
		{"./a", testCwd + "/b/a", false},
		{"//", "/anything/at/all", true},
		{"//**", "/", true},
		{"//etc/passwd", "/etc/passwd", true},
		{"//etc/pass*", "/etc/passwd", true},
		{"//etc/pass*", "/etc/passwd.d/x", true},
		{"//*/passwd", "/etc/passwd", true},
		{"//*/passwd", "/a/etc/passwd", false},
		{"//a/**/b/**/c", "/a/x/b/y/z/c", true},
		{"//a/**/b/**/c", "/a/b/c", true},
		{"//a/**/b/**/c", "/a/x/c", false},
		{"~", testHome, true},
		{"~", testHome + "/x", true},
		{"~/", testHome + "/x", true},
		{"~/*.txt", testHome + "/a.txt", true},
		{"~/*.txt", "/home/anabel/a.txt", false},
		{"//x/a?c", "/x/abc", true},
		{"//x/a?c", "/x/ac", false},
		{"//x/[abc]", "/x/b", true},
		{"//x/[^abc]", "/x/b", false},
		{"//x/[]]", "/x/]", true},
		{`//x/\*`, "/x/*", true},
		{`//x/\*`, "/x/a", false},
		{"//x/*a*b*c", "/x/" + strings.Repeat("a", 50) + "bd", false},
	}
	for _, tt := range tests {
		p, err := compileClaudePath(tt.pattern)
		if err != nil {
			t.Fatalf("compile %q: %v", tt.pattern, err)
		}
		if got := p.match(tt.path, testCwd, testHome); got != tt.want {
			t.Errorf("Read(%s) on %q = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
}

func TestRootCwdAndEmptyHome(t *testing.T) {
	p, _ := compileClaudePath("*.go")
	if !p.match("/x/a.go", "/", "") {
		t.Error("cwd / did not match")
	}
	h, _ := compileClaudePath("~/**")
	if h.match("/x", "/", "") {
		t.Error("~ matched with no home")
	}
}

func TestHostOf(t *testing.T) {
	for url, want := range map[string]string{
		"https://example.com":             "example.com",
		"https://example.com./a":          "example.com",
		"http://u:p@Example.com:80/x?y#z": "Example.com",
		"https://[::1]:8080/":             "[::1]",
		"https://a.b?x=//c":               "a.b",
		"example.com/x":                   "",
		"":                                "",
	} {
		if got := hostOf(url); got != want {
			t.Errorf("hostOf(%q) = %q, want %q", url, got, want)
		}
	}
}
