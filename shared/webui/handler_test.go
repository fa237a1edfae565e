package webui

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func get(t *testing.T, path string, hdr ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, r *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

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

func TestIndexAndRoutes(t *testing.T) {
	index, _ := fs.ReadFile(FS, "index.html")
	for _, p := range []string{"/", "/index.html", "/m/m1/s/s1"} {
		r := get(t, p)
		if r.StatusCode != 200 || !bytes.Equal(body(t, r), index) {
			t.Errorf("%s: status %d, want index.html", p, r.StatusCode)
		}
		if cc := r.Header.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("%s: Cache-Control %q", p, cc)
		}
		if !strings.Contains(r.Header.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("%s: no CSP", p)
		}
	}
	if r := get(t, "/api/nope"); r.StatusCode != 404 {
		t.Errorf("/api/nope: %d, want 404", r.StatusCode)
	}
	if r := get(t, "/missing.js"); r.StatusCode != 404 {
		t.Errorf("/missing.js: %d, want 404", r.StatusCode)
	}
	if r := get(t, "/sw.js"); r.StatusCode != 200 || r.Header.Get("Cache-Control") != "no-cache" || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/javascript") {
		t.Errorf("/sw.js: %d %q %q", r.StatusCode, r.Header.Get("Cache-Control"), r.Header.Get("Content-Type"))
	}
	if r := get(t, "/manifest.webmanifest"); r.Header.Get("Content-Type") != "application/manifest+json" {
		t.Errorf("manifest type %q", r.Header.Get("Content-Type"))
	}
}

func TestAssetsGzipAndCaching(t *testing.T) {
	assets, _ := fs.Glob(FS, "assets/*.js")
	name := assets[0]
	raw, _ := fs.ReadFile(FS, name)
	plain := get(t, "/"+name)
	if plain.Header.Get("Content-Encoding") != "" || !bytes.Equal(body(t, plain), raw) {
		t.Fatal("without Accept-Encoding: want the plain file")
	}
	if !strings.Contains(plain.Header.Get("Cache-Control"), "immutable") {
		t.Errorf("asset Cache-Control %q", plain.Header.Get("Cache-Control"))
	}
	gz := get(t, "/"+name, "Accept-Encoding", "br, gzip;q=0.8")
	if gz.Header.Get("Content-Encoding") != "gzip" || gz.Header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("gzip: encoding %q vary %q", gz.Header.Get("Content-Encoding"), gz.Header.Get("Vary"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(body(t, gz)))
	if err != nil {
		t.Fatal(err)
	}
	un, _ := io.ReadAll(zr)
	if !bytes.Equal(un, raw) {
		t.Fatal("the .gz does not decompress to the file")
	}
	if r := get(t, "/"+name, "Accept-Encoding", "gzip;q=0"); r.Header.Get("Content-Encoding") != "" {
		t.Error("gzip;q=0 got gzip")
	}
	if r := get(t, "/"+name+".gz"); r.StatusCode != 404 {
		t.Errorf(".gz by name: %d, want 404", r.StatusCode)
	}
}

// TestGzipSiblingsAreDeterministic checks the .gz files have no mtime and no file name, so the
// checked-in dist is reproducible.
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
