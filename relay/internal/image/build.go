package image

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Config says what to build and where.
type Config struct {
	// RelayDir is the relay module's directory (it holds cmd/betcode-relay).
	RelayDir string
	// Platforms are os/arch pairs; linux only. Default: linux/amd64 and
	// linux/arm64.
	Platforms []string
	// Version goes into the binaries (main.version) and the labels;
	// Revision (the commit) and Source (the repository's URL) into the
	// labels; Created is the image's creation time and every file's mtime:
	// the commit's time, for reproducible builds.
	Version, Revision, Source string
	Created                   time.Time
	// CACerts is the CA bundle to copy into the image (default
	// /etc/ssl/certs/ca-certificates.crt).
	CACerts string
	// Layout is the OCI image layout directory to write (replaced), Archive
	// the same layout as a tar (an oci-archive; empty: none).
	Layout, Archive string
	// Go is the go command (default "go"); Log receives the build's steps
	// (default: discarded).
	Go  string
	Log io.Writer
}

// DefaultPlatforms are the platforms of the published image.
var DefaultPlatforms = []string{"linux/amd64", "linux/arm64"}

// Result is what Build wrote.
type Result struct {
	// Index is the digest of the image index (the multi-platform image).
	Index v1.Hash
	// Images are the platform images' manifest digests, by os/arch, and
	// SBOMs the digests of the SBOM referrers attached to them.
	Images, SBOMs map[string]v1.Hash
}

// Build compiles the relay for every platform and writes the image.
func Build(ctx context.Context, c Config) (Result, error) {
	if err := c.defaults(); err != nil {
		return Result{}, err
	}
	ca, err := os.ReadFile(c.CACerts)
	if err != nil {
		return Result{}, fmt.Errorf("image: CA certificates (install the ca-certificates package or pass the bundle's path): %w", err)
	}
	work, err := os.MkdirTemp("", "betcode-relay-image-")
	if err != nil {
		return Result{}, fmt.Errorf("image: %w", err)
	}
	defer os.RemoveAll(work)
	binaries := map[string][]byte{}
	for _, p := range c.Platforms {
		bin, err := c.compile(ctx, p, filepath.Join(work, strings.ReplaceAll(p, "/", "-")))
		if err != nil {
			return Result{}, err
		}
		binaries[p] = bin
	}
	return c.assemble(binaries, ca)
}

func (c *Config) defaults() error {
	if len(c.Platforms) == 0 {
		c.Platforms = DefaultPlatforms
	}
	for _, p := range c.Platforms {
		if os, arch, ok := strings.Cut(p, "/"); !ok || os != "linux" || arch == "" {
			return fmt.Errorf("image: platform %q: want linux/ARCH", p)
		}
	}
	if c.RelayDir == "" || c.Layout == "" {
		return fmt.Errorf("image: RelayDir and Layout are required")
	}
	if c.Created.IsZero() {
		return fmt.Errorf("image: no creation time: pass the commit's time (reproducible builds)")
	}
	if c.CACerts == "" {
		c.CACerts = "/etc/ssl/certs/ca-certificates.crt"
	}
	if c.Go == "" {
		c.Go = "go"
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}

// compile builds a static, trimmed betcode-relay for platform into path
// and returns its bytes.
func (c *Config) compile(ctx context.Context, platform, path string) ([]byte, error) {
	goos, goarch, _ := strings.Cut(platform, "/")
	cmd := exec.CommandContext(ctx, c.Go, "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X main.version="+c.Version, "-o", path, "./cmd/betcode-relay")
	cmd.Dir = c.RelayDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=")
	fmt.Fprintf(c.Log, "build betcode-relay %s for %s\n", c.Version, platform)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("image: go build for %s: %w\n%s", platform, err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return b, nil
}

// labels are the OCI annotations of the images and the index.
func (c *Config) labels() map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "betcode-relay",
		"org.opencontainers.image.description": "BetCode relay: machines dial out to it, clients reach them through it",
		"org.opencontainers.image.version":     c.Version,
		"org.opencontainers.image.created":     c.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "NOASSERTION",
	}
	if c.Revision != "" {
		l["org.opencontainers.image.revision"] = c.Revision
	}
	if c.Source != "" {
		l["org.opencontainers.image.source"] = c.Source
	}
	return l
}

// assemble writes the index of the platform images and their SBOMs.
func (c *Config) assemble(binaries map[string][]byte, ca []byte) (Result, error) {
	res := Result{Images: map[string]v1.Hash{}, SBOMs: map[string]v1.Hash{}}
	var idx v1.ImageIndex = empty.Index
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	type sbomOf struct {
		doc     []byte
		subject v1.Descriptor
	}
	var sboms []sbomOf
	for _, p := range c.Platforms {
		img, err := c.platformImage(p, binaries[p], ca)
		if err != nil {
			return res, err
		}
		desc, err := descriptor(img)
		if err != nil {
			return res, fmt.Errorf("image: %s: %w", p, err)
		}
		goos, goarch, _ := strings.Cut(p, "/")
		desc.Platform = &v1.Platform{OS: goos, Architecture: goarch}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: *desc})
		res.Images[p] = desc.Digest
		doc, err := sbom(binaries[p], p, c.Version, c.Created)
		if err != nil {
			return res, err
		}
		sboms = append(sboms, sbomOf{doc, *desc})
	}
	idx = mutate.Annotations(idx, c.labels()).(v1.ImageIndex)
	d, err := idx.Digest()
	if err != nil {
		return res, fmt.Errorf("image: index: %w", err)
	}
	res.Index = d

	if err := os.RemoveAll(c.Layout); err != nil {
		return res, fmt.Errorf("image: %w", err)
	}
	lp, err := layout.Write(c.Layout, empty.Index)
	if err != nil {
		return res, fmt.Errorf("image: layout %s: %w", c.Layout, err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": c.Version,
	})); err != nil {
		return res, fmt.Errorf("image: layout %s: %w", c.Layout, err)
	}
	for i, s := range sboms {
		h, err := writeReferrer(lp, s.doc, s.subject, c.Created)
		if err != nil {
			return res, fmt.Errorf("image: SBOM of %s: %w", c.Platforms[i], err)
		}
		res.SBOMs[c.Platforms[i]] = h
	}
	if c.Archive != "" {
		if err := archive(c.Layout, c.Archive, c.Created); err != nil {
			return res, err
		}
	}
	return res, nil
}

// platformImage is the relay's image for one platform: one layer on
// nothing, and the run settings of spec.go.
func (c *Config) platformImage(platform string, binary, ca []byte) (v1.Image, error) {
	layer, err := rootfs(binary, ca, c.Created)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   v1.Time{Time: c.Created.UTC()},
		CreatedBy: "relay/internal/image: betcode-relay " + c.Version + ", CA certificates, user nonroot (65532)",
		Comment:   "make image",
	}})
	if err != nil {
		return nil, fmt.Errorf("image: %s: %w", platform, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: %s: %w", platform, err)
	}
	cf = cf.DeepCopy()
	goos, goarch, _ := strings.Cut(platform, "/")
	cf.OS, cf.Architecture = goos, goarch
	cf.Created = v1.Time{Time: c.Created.UTC()}
	ports := map[string]struct{}{}
	for _, p := range ExposedPorts() {
		ports[p] = struct{}{}
	}
	cf.Config = v1.Config{
		User: User, Entrypoint: Entrypoint(), Env: Env(), WorkingDir: Home,
		ExposedPorts: ports, StopSignal: StopSignal, Healthcheck: Healthcheck(), Labels: c.labels(),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: %s: %w", platform, err)
	}
	return mutate.Annotations(img, c.labels()).(v1.Image), nil
}

// descriptor is img's descriptor in an index.
func descriptor(img v1.Image) (*v1.Descriptor, error) {
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	sz, err := img.Size()
	if err != nil {
		return nil, err
	}
	mt, err := img.MediaType()
	if err != nil {
		return nil, err
	}
	return &v1.Descriptor{MediaType: mt, Digest: d, Size: sz}, nil
}

// emptyJSON is the OCI 1.1 empty descriptor's content: the config of an
// artifact that has none.
var emptyJSON = []byte("{}")

// writeReferrer stores doc as an OCI 1.1 artifact (artifactType
// SBOMArtifactType, its subject the platform image) in the layout and
// lists it in the layout's index.json, where referrers are found by their
// subject. It returns the artifact manifest's digest.
func writeReferrer(lp layout.Path, doc []byte, subject v1.Descriptor, created time.Time) (v1.Hash, error) {
	docHash, docSize, err := v1.SHA256(bytes.NewReader(doc))
	if err != nil {
		return v1.Hash{}, err
	}
	cfgHash, cfgSize, err := v1.SHA256(bytes.NewReader(emptyJSON))
	if err != nil {
		return v1.Hash{}, err
	}
	subject.Platform, subject.Annotations = nil, nil
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  SBOMArtifactType,
		Config:        v1.Descriptor{MediaType: "application/vnd.oci.empty.v1+json", Digest: cfgHash, Size: cfgSize},
		Layers: []v1.Descriptor{{
			MediaType: SBOMArtifactType, Digest: docHash, Size: docSize,
			Annotations: map[string]string{"org.opencontainers.image.title": "betcode-relay.cdx.json"},
		}},
		Subject:     &subject,
		Annotations: map[string]string{"org.opencontainers.image.created": created.UTC().Format(time.RFC3339)},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return v1.Hash{}, err
	}
	mHash, mSize, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return v1.Hash{}, err
	}
	for _, b := range []struct {
		h    v1.Hash
		data []byte
	}{{docHash, doc}, {cfgHash, emptyJSON}, {mHash, raw}} {
		if err := lp.WriteBlob(b.h, io.NopCloser(bytes.NewReader(b.data))); err != nil {
			return v1.Hash{}, err
		}
	}
	return mHash, lp.AppendDescriptor(v1.Descriptor{
		MediaType: types.OCIManifestSchema1, Digest: mHash, Size: mSize, ArtifactType: SBOMArtifactType,
	})
}

// archive writes the layout directory dir as the tar path (an
// oci-archive: the layout at the tar's root), in name order with fixed
// owners and times.
func archive(dir, path string, mtime time.Time) error {
	var entries []entry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		e := entry{name: "/" + filepath.ToSlash(rel), mode: 0o755, dir: d.IsDir()}
		if !d.IsDir() {
			if e.data, err = os.ReadFile(p); err != nil {
				return err
			}
			e.mode = 0o644
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return fmt.Errorf("image: archive %s: %w", dir, err)
	}
	var buf bytes.Buffer
	if err := writeTar(&buf, entries, mtime); err != nil {
		return fmt.Errorf("image: archive %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("image: archive: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("image: archive: %w", err)
	}
	return nil
}
