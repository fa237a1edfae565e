package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// passwd and group name root and the non-root user the relay runs as; the
// relay needs neither, but tools that map ids to names (and `docker exec`
// users) do.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

// entry is one file or directory of the layer.
type entry struct {
	name     string // absolute path in the image
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// rootfs returns the image's one layer: the relay binary, the CA bundle,
// passwd and group, /tmp and the user's home, every entry with mtime
// created so that the same inputs give the same bytes.
func rootfs(binary, caCerts []byte, created time.Time) (v1.Layer, error) {
	files := []entry{
		{name: "/etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "/etc/group", mode: 0o644, data: []byte(group)},
		{name: CACertsPath, mode: 0o644, data: caCerts},
		{name: BinaryPath, mode: 0o755, data: binary},
	}
	dirs := map[string]entry{
		"/tmp": {name: "/tmp", mode: 0o1777, dir: true},
		Home:   {name: Home, mode: 0o700, uid: UID, gid: GID, dir: true},
	}
	for _, e := range slices.Concat(files, []entry{dirs[Home]}) { // every parent directory, root-owned 0755
		for d := path.Dir(e.name); d != "/"; d = path.Dir(d) {
			if _, ok := dirs[d]; !ok {
				dirs[d] = entry{name: d, mode: 0o755, dir: true}
			}
		}
	}
	all := files
	for _, d := range dirs {
		all = append(all, d)
	}
	var buf bytes.Buffer
	if err := writeTar(&buf, all, created); err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	b := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	return layer, nil
}

// writeTar writes entries sorted by name (a parent before its children)
// with fixed owners, modes and times.
func writeTar(w io.Writer, entries []entry, mtime time.Time) error {
	// By name: every directory comes before what it holds.
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{
			Name: strings.TrimPrefix(e.name, "/"), Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: mtime.UTC().Truncate(time.Second), Format: tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
	}
	return tw.Close()
}
