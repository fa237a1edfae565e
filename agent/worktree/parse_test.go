package worktree

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseList(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []entry
	}{
		{"main and linked", "worktree /r\x00HEAD abc\x00branch refs/heads/main\x00\x00worktree /r.worktrees/x\x00HEAD def\x00branch refs/heads/feature/x\x00\x00",
			[]entry{{Path: "/r", Head: "abc", Branch: "main"}, {Path: "/r.worktrees/x", Head: "def", Branch: "feature/x"}}},
		{"bare, detached, locked, prunable", "worktree /b.git\x00bare\x00\x00worktree /w\x00HEAD abc\x00detached\x00locked on usb\x00prunable gitdir file points to non-existent location\x00\x00",
			[]entry{{Path: "/b.git", Bare: true}, {Path: "/w", Head: "abc", Detached: true, Locked: true, LockReason: "on usb", Prunable: true}}},
		{"locked without reason, unknown attribute", "worktree /w\x00HEAD abc\x00branch refs/heads/a\x00locked\x00future thing\x00\x00",
			[]entry{{Path: "/w", Head: "abc", Branch: "a", Locked: true}}},
		{"path with a newline and spaces", "worktree /a b\nc\x00HEAD abc\x00\x00", []entry{{Path: "/a b\nc", Head: "abc"}}},
		{"empty", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseList([]byte(tc.in))
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("parseList = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{"HEAD abc\x00", "worktree\x00", "worktree /a\x00\x00branch x\x00"} {
		if got, err := parseList([]byte(bad)); err == nil {
			t.Fatalf("parseList(%q) = %v; want an error", bad, got)
		}
	}
}

// FuzzParseList: git's output is parsed without panics, and every entry
// has a path.
func FuzzParseList(f *testing.F) {
	f.Add([]byte("worktree /r\x00HEAD abc\x00branch refs/heads/main\x00\x00"))
	f.Add([]byte("worktree /b.git\x00bare\x00\x00worktree /w\x00detached\x00locked why\x00prunable\x00\x00"))
	f.Add([]byte("\x00\x00worktree x"))
	f.Fuzz(func(t *testing.T, in []byte) {
		list, err := parseList(in)
		if err != nil {
			return
		}
		for _, e := range list {
			if e.Path == "" {
				t.Fatalf("entry without a path from %q", in)
			}
		}
	})
}

func TestCheckPathSafe(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"feature/a", true},
		{"fix-123", true},
		{"ünïcode", true},
		{"", false},
		{"..", false},
		{"a/../b", false},
		{"./a", false},
		{"/abs", false},
		{"-rf", false},
		{"tab\there", false},
		{"nl\nhere", false},
		{"del\x7f", false},
		{string([]byte{0xff, 0xfe}), false},
		{strings.Repeat("a", MaxNameBytes+1), false},
	} {
		if err := checkPathSafe("name", tc.in); (err == nil) != tc.ok {
			t.Errorf("checkPathSafe(%q) = %v; want ok %v", tc.in, err, tc.ok)
		}
	}
}

func TestDefaultPath(t *testing.T) {
	for _, tc := range []struct{ base, name, want string }{
		{"/src/proj", "feature/a", "/src/proj.worktrees/feature-a"},
		{"/src/proj.git", "main", "/src/proj.worktrees/main"},
		{"/src/super/lib", "x", "/src/super/lib.worktrees/x"},
	} {
		if got := defaultPath(tc.base, tc.name); got != tc.want {
			t.Errorf("defaultPath(%q, %q) = %q; want %q", tc.base, tc.name, got, tc.want)
		}
	}
}
