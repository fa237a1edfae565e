package webapi

import (
	"bytes"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// staticFS serves the built web app.
type staticFS struct {
	fsys fs.FS
}

// hashed matches the content-hashed names of a bundler's output, e.g.
// index-3f9a1c2b.js or app.BcD4xY_z.css; under assets/ (Vite's output) the
// hash may contain "-" too (base64url).
var (
	hashed       = regexp.MustCompile(`[.-][A-Za-z0-9_]{8,}\.(js|mjs|css|woff2?|png|svg|jpg|webp|wasm|map)$`)
	hashedAssets = regexp.MustCompile(`-[A-Za-z0-9_-]{8,}\.[a-z0-9]+$`)
)

// contentTypes are the types mime's table may lack on a minimal system.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8", ".json": "application/json", ".webmanifest": "application/manifest+json",
	".svg": "image/svg+xml", ".png": "image/png", ".ico": "image/x-icon", ".wasm": "application/wasm",
	".woff2": "font/woff2", ".woff": "font/woff", ".txt": "text/plain; charset=utf-8", ".map": "application/json",
}

func contentType(name string) string {
	ext := path.Ext(name)
	if ct, ok := contentTypes[ext]; ok {
		return ct
	}
	if ct := mime.TypeByExtension(ext); ct != "" {
		return ct
	}
	return "application/octet-stream"
}

// serveStatic serves a file of the web app, or index.html for paths that
// are no file (the app routes them itself).
func (h *Handler) serveStatic(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if h.static == nil {
		http.Error(w, "this server has no web app built in", http.StatusNotFound)
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	if name == "" {
		name = "index.html"
	}
	if !h.static.isFile(name) {
		if path.Ext(name) != "" && name != "index.html" {
			// A missing asset, not an app route: a 404 beats HTML the
			// browser would try to run as a script.
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		name = "index.html"
	}
	h.static.serve(w, r, name)
}

func (s *staticFS) isFile(name string) bool {
	fi, err := fs.Stat(s.fsys, name)
	return err == nil && fi.Mode().IsRegular()
}

func (s *staticFS) serve(w http.ResponseWriter, r *http.Request, name string) {
	hd := w.Header()
	base := path.Base(name)
	switch {
	case base == "index.html" || base == "sw.js":
		hd.Set("Cache-Control", "no-cache")
	case hashed.MatchString(base), strings.HasPrefix(name, "assets/") && hashedAssets.MatchString(base):
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	default:
		hd.Set("Cache-Control", "no-cache")
	}
	hd.Set("Content-Type", contentType(name))
	hd.Add("Vary", "Accept-Encoding")
	file := name
	if acceptsGzip(r) && s.isFile(name+".gz") {
		file = name + ".gz"
		hd.Set("Content-Encoding", "gzip")
	}
	f, err := s.fsys.Open(file)
	if err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	defer f.Close()
	var mod time.Time
	if fi, err := f.Stat(); err == nil {
		mod = fi.ModTime()
	}
	rs, ok := f.(io.ReadSeeker)
	if !ok {
		b, err := io.ReadAll(f)
		if err != nil {
			http.Error(w, "read "+name, http.StatusInternalServerError)
			return
		}
		rs = bytes.NewReader(b)
	}
	if file != name {
		// Ranges of the compressed bytes would confuse the client.
		r.Header.Del("Range")
	}
	http.ServeContent(w, r, name, mod, rs)
}

// acceptsGzip reports whether the client takes gzip content encoding.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			continue
		}
		q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q=")
		if !ok {
			return true
		}
		v, err := strconv.ParseFloat(q, 64)
		return err == nil && v > 0
	}
	return false
}
