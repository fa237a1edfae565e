package webapi

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"testing"
	"testing/fstest"
)

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return b.Bytes()
}

func TestStatic(t *testing.T) {
	app := fstest.MapFS{
		"index.html":                  {Data: []byte("<!doctype html><title>BetCode</title>")},
		"sw.js":                       {Data: []byte("self.x=1")},
		"assets/index-3f9a1c2b.js":    {Data: []byte("console.log(1)")},
		"assets/index-3f9a1c2b.js.gz": {Data: gz(t, "console.log(1)")},
		"manifest.webmanifest":        {Data: []byte("{}")},
	}
	ts := newTestServer(t, Options{Static: app})
	tests := []struct {
		name, path, acceptEncoding   string
		status                       int
		contentType, cache, encoding string
		body                         string
	}{
		{name: "root", path: "/", status: 200, contentType: "text/html; charset=utf-8", cache: "no-cache", body: "<!doctype html><title>BetCode</title>"},
		{name: "service worker", path: "/sw.js", status: 200, contentType: "text/javascript; charset=utf-8", cache: "no-cache"},
		{name: "hashed asset", path: "/assets/index-3f9a1c2b.js", status: 200, contentType: "text/javascript; charset=utf-8",
			cache: "public, max-age=31536000, immutable", body: "console.log(1)"},
		{name: "precompressed", path: "/assets/index-3f9a1c2b.js", acceptEncoding: "br, gzip", status: 200,
			contentType: "text/javascript; charset=utf-8", cache: "public, max-age=31536000, immutable", encoding: "gzip"},
		{name: "gzip refused", path: "/assets/index-3f9a1c2b.js", acceptEncoding: "gzip;q=0", status: 200,
			contentType: "text/javascript; charset=utf-8", body: "console.log(1)"},
		{name: "manifest", path: "/manifest.webmanifest", status: 200, contentType: "application/manifest+json", cache: "no-cache"},
		{name: "SPA route", path: "/m/m1/s/s1", status: 200, contentType: "text/html; charset=utf-8", cache: "no-cache", body: "<!doctype html><title>BetCode</title>"},
		{name: "missing asset", path: "/assets/gone-12345678.js", status: 404},
		{name: "API stays JSON", path: "/api/nope", status: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", ts.srv.URL+tt.path, nil)
			// An explicit header turns off the transport's own gzip.
			req.Header.Set("Accept-Encoding", tt.acceptEncoding)
			if tt.acceptEncoding == "" {
				req.Header.Set("Accept-Encoding", "identity")
			}
			if tt.path == "/api/nope" {
				req.Header.Set("Authorization", "")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if tt.path == "/api/nope" {
				// Unknown API paths are never the app: 404 JSON (no auth needed to say so).
				if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
					t.Fatalf("GET %s = %d %s", tt.path, resp.StatusCode, resp.Header.Get("Content-Type"))
				}
				return
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("GET %s = %d, want %d", tt.path, resp.StatusCode, tt.status)
			}
			if tt.status != 200 {
				return
			}
			if got := resp.Header.Get("Content-Type"); got != tt.contentType {
				t.Errorf("Content-Type = %q, want %q", got, tt.contentType)
			}
			if tt.cache != "" && resp.Header.Get("Cache-Control") != tt.cache {
				t.Errorf("Cache-Control = %q, want %q", resp.Header.Get("Cache-Control"), tt.cache)
			}
			if got := resp.Header.Get("Content-Encoding"); got != tt.encoding {
				t.Errorf("Content-Encoding = %q, want %q", got, tt.encoding)
			}
			if tt.encoding == "gzip" {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				body, _ = io.ReadAll(zr)
				if string(body) != "console.log(1)" {
					t.Errorf("body = %q", body)
				}
			}
			if tt.body != "" && string(body) != tt.body {
				t.Errorf("body = %q, want %q", body, tt.body)
			}
			for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy"} {
				if resp.Header.Get(h) == "" {
					t.Errorf("%s missing", h)
				}
			}
		})
	}
}

func TestNoStatic(t *testing.T) {
	ts := newTestServer(t, Options{})
	resp, err := http.Get(ts.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("GET / without an app = %d, want 404", resp.StatusCode)
	}
}
