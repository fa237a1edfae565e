package acp

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	acpsdk "github.com/coder/acp-go-sdk"
)

func TestWithin(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "p")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir, path string
		rel             string // "" = refused
	}{
		{"file", dir, filepath.Join(dir, "a.txt"), "a.txt"},
		{"dir itself", dir, dir, "."},
		{"relative", dir, "sub/a.txt", "sub/a.txt"},
		{"dotdot back inside", dir, dir + "/sub/../a.txt", "a.txt"},
		{"dotdot out", dir, dir + "/../x", ""},
		{"relative dotdot out", dir, "../x", ""},
		{"sibling with a common prefix", dir, dir + "x/a", ""},
		{"absolute elsewhere", dir, "/etc/passwd", ""},
		{"dir given through a symlink, path real", link, filepath.Join(dir, "a"), "a"},
		{"dir real, path through the symlink", dir, filepath.Join(link, "a"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rel, err := within(tc.dir, tc.path)
			if tc.rel == "" {
				if !errors.Is(err, errOutside) {
					t.Errorf("within(%q) = %q, %v; want refused", tc.path, rel, err)
				}
				return
			}
			if err != nil || rel != tc.rel {
				t.Errorf("within(%q) = %q, %v; want %q", tc.path, rel, err, tc.rel)
			}
		})
	}
}

func TestInside(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "p")
	must(t, os.Mkdir(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(root, "secret"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "a"), nil, 0o644))
	must(t, os.Symlink(filepath.Join(root, "secret"), filepath.Join(dir, "out")))
	must(t, os.Symlink("a", filepath.Join(dir, "in")))
	for path, want := range map[string]bool{
		"a": true, "in": true, "missing": true, "out": false, "../secret": false,
	} {
		if got := inside(dir, filepath.Join(dir, path)); got != want {
			t.Errorf("inside(%s) = %v, want %v", path, got, want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestReadTextFileLines(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("1\n2\n3\n4"), 0o644))
	n := func(i int) *int { return &i }
	tests := []struct {
		name        string
		line, limit *int
		want        string
	}{
		{"all", nil, nil, "1\n2\n3\n4"},
		{"from line 2", n(2), nil, "2\n3\n4"},
		{"two lines", nil, n(2), "1\n2\n"},
		{"line 3, one line", n(3), n(1), "3\n"},
		{"past the end", n(9), n(2), ""},
		{"line 0 is the first", n(0), n(1), "1\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := readTextFile(dir, acpsdk.ReadTextFileRequest{Path: filepath.Join(dir, "f"), Line: tc.line, Limit: tc.limit})
			if err != nil || r.Content != tc.want {
				t.Errorf("read = %q, %v; want %q", r.Content, err, tc.want)
			}
		})
	}
	big := filepath.Join(dir, "big")
	must(t, os.WriteFile(big, make([]byte, maxReadBytes+1), 0o644))
	if _, err := readTextFile(dir, acpsdk.ReadTextFileRequest{Path: big}); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("reading a file over the limit: %v", err)
	}
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{limit: 5}
	_, _ = b.Write([]byte("abc"))
	if s, tr := b.String(); s != "abc" || tr {
		t.Errorf("%q %v", s, tr)
	}
	_, _ = b.Write([]byte("défg"))               // é is two bytes
	if s, tr := b.String(); s != "défg" || !tr { // the last 5 bytes
		t.Errorf("after overflow %q %v", s, tr)
	}
	b = &tailBuffer{limit: 4}
	_, _ = b.Write([]byte("xé€")) // 1+2+3 bytes: the cut must not split €
	if s, _ := b.String(); s != "€" {
		t.Errorf("kept %q, want €", s)
	}
}

func TestEOFMarker(t *testing.T) {
	r := &eofMarker{r: iotest.OneByteReader(strings.NewReader("ab")), line: []byte("\nM\n")}
	b, err := io.ReadAll(r)
	if err != nil || string(b) != "ab\nM\n" {
		t.Errorf("read %q, %v", b, err)
	}
	r = &eofMarker{r: iotest.ErrReader(errors.New("closed")), line: []byte("M")}
	if b, _ := io.ReadAll(r); string(b) != "M" {
		t.Errorf("after a read error: %q", b)
	}
}

func TestOutQueue(t *testing.T) {
	q := newOutQueue()
	done := make(chan []string)
	go func() {
		var got []string
		for {
			o, ok := q.next()
			if !ok {
				done <- got
				return
			}
			got = append(got, o.Withdrawn)
		}
	}()
	for _, id := range []string{"a", "b", "c"} {
		q.push(outputWithdrawn(id))
	}
	q.close()
	q.push(outputWithdrawn("late"))
	if got := strings.Join(<-done, ","); got != "a,b,c" {
		t.Errorf("read %s, want a,b,c", got)
	}
}
