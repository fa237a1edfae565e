package webui

import (
	"bytes"
	"io/fs"
	"testing"
)

func TestFSHasTheAppShell(t *testing.T) {
	for _, name := range []string{"index.html", "sw.js", "manifest.webmanifest", "icon.svg", "icon-192.png", "icon-512.png"} {
		if _, err := fs.Stat(FS, name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	assets, err := fs.Glob(FS, "assets/*.js")
	if err != nil || len(assets) == 0 {
		t.Fatalf("no assets/*.js in dist (%v): run make web", err)
	}
}

// TestGzipSiblingsAreDeterministic checks the .gz files have no mtime and no
// file name, so the checked-in dist is reproducible.
func TestGzipSiblingsAreDeterministic(t *testing.T) {
	gzs, _ := fs.Glob(FS, "assets/*.gz")
	if len(gzs) == 0 {
		t.Fatal("no .gz siblings")
	}
	for _, g := range gzs {
		b, _ := fs.ReadFile(FS, g)
		if len(b) < 10 || b[3]&0x08 != 0 || !bytes.Equal(b[4:8], []byte{0, 0, 0, 0}) {
			t.Errorf("%s: gzip header has a name or an mtime: % x", g, b[:10])
		}
	}
}
