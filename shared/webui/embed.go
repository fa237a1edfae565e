// Package webui holds BetCode's web app (phones and laptops), built from web/ by `make web`
// into dist/ and checked in, so the agent and the relay serve it with no Node.js at run time.
//
// dist/ is the app shell: index.html, sw.js (the service worker, served unhashed with
// Cache-Control: no-cache), manifest.webmanifest, icons, and assets/ with content-hashed names
// (safe to cache forever). Every compressible file over 1 KB has a deterministic .gz sibling to
// serve when the client accepts gzip; shared/webapi serves all of it.
package webui

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// FS is the built web app: the tree of dist/, with index.html at its root.
var FS fs.FS = mustSub(dist, "dist")

func mustSub(f fs.FS, dir string) fs.FS {
	s, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return s
}
