package image

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image the tests read is built once per test binary: for this
// machine's architecture only (a cold build of the relay takes a minute or
// two on CI's two cores; each more platform as much again), or for
// BETCODE_IMAGE_PLATFORMS (e.g. linux/amd64,linux/arm64), as make image
// does.
var (
	buildOnce sync.Once
	built     Result
	builtCfg  Config
	buildErr  error
	workDir   string
)

var created = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const testVersion = "v0.0.0-imagetest"

func TestMain(m *testing.M) {
	code := m.Run()
	if workDir != "" {
		os.RemoveAll(workDir)
	}
	os.Exit(code)
}

func testPlatforms() []string {
	if p := os.Getenv("BETCODE_IMAGE_PLATFORMS"); p != "" {
		return strings.Split(p, ",")
	}
	return []string{"linux/" + runtime.GOARCH}
}

func testConfig(dir string) Config {
	return Config{
		RelayDir: "../..", Platforms: testPlatforms(), Version: testVersion,
		Revision: "0123456789abcdef0123456789abcdef01234567", Source: "https://example.test/betcode",
		Created: created, Layout: filepath.Join(dir, "image"), Archive: filepath.Join(dir, "image.oci.tar"),
	}
}

// image builds the image once and returns what Build reported and the
// layout's path.
func image(t *testing.T) (Result, Config) {
	t.Helper()
	if runtime.GOOS != "linux" {
		const why = "the image's binaries are Linux binaries: the tests run them (run them on Linux)"
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	buildOnce.Do(func() {
		if workDir, buildErr = os.MkdirTemp("", "betcode-image-test-"); buildErr != nil {
			return
		}
		builtCfg = testConfig(filepath.Join(workDir, "a"))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		built, buildErr = Build(ctx, builtCfg)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built, builtCfg
}

// index reads the layout: the relay's image index and the SBOM referrers'
// descriptors.
func index(t *testing.T, dir string) (v1.ImageIndex, []v1.Descriptor) {
	t.Helper()
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var idx v1.ImageIndex
	var sboms []v1.Descriptor
	for _, d := range im.Manifests {
		switch {
		case d.MediaType == types.OCIImageIndex:
			if idx != nil {
				t.Fatal("two image indexes in the layout")
			}
			if got := d.Annotations["org.opencontainers.image.ref.name"]; got != testVersion {
				t.Errorf("the index's ref.name is %q, want %q", got, testVersion)
			}
			if idx, err = top.ImageIndex(d.Digest); err != nil {
				t.Fatal(err)
			}
		case d.ArtifactType == SBOMArtifactType:
			sboms = append(sboms, d)
		default:
			t.Errorf("unexpected manifest in the layout: %+v", d)
		}
	}
	if idx == nil {
		t.Fatal("no image index in the layout")
	}
	return idx, sboms
}

// platformImage returns the index's image for platform.
func platformImage(t *testing.T, idx v1.ImageIndex, platform string) v1.Image {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.OS+"/"+d.Platform.Architecture == platform {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("no %s image in the index", platform)
	return nil
}

func TestIndexHasEveryPlatform(t *testing.T) {
	res, cfg := image(t)
	idx, _ := index(t, cfg.Layout)
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d != res.Index {
		t.Errorf("the layout's index is %s, Build said %s", d, res.Index)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range im.Manifests {
		if m.MediaType != types.OCIManifestSchema1 || m.Platform == nil {
			t.Errorf("index entry %s: media type %s, platform %v", m.Digest, m.MediaType, m.Platform)
			continue
		}
		got = append(got, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	if !slices.Equal(got, cfg.Platforms) {
		t.Errorf("platforms %v, want %v", got, cfg.Platforms)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  testVersion,
		"org.opencontainers.image.revision": cfg.Revision,
		"org.opencontainers.image.source":   cfg.Source,
		"org.opencontainers.image.created":  "2026-12-01T12:00:00Z",
	} {
		if got := im.Annotations[k]; got != want {
			t.Errorf("index annotation %s = %q, want %q", k, got, want)
		}
	}
}

func TestConfigRunsAsNonRootWithHealthcheck(t *testing.T) {
	_, cfg := image(t)
	idx, _ := index(t, cfg.Layout)
	for _, p := range cfg.Platforms {
		t.Run(p, func(t *testing.T) {
			cf, err := platformImage(t, idx, p).ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			c := cf.Config
			if uid, _, _ := strings.Cut(c.User, ":"); uid == "" || uid == "0" || uid == "root" {
				t.Errorf("User %q: the relay must not run as root", c.User)
			}
			if c.User != "65532:65532" {
				t.Errorf("User %q, want 65532:65532 (distroless' nonroot, as deploy/Dockerfile.relay)", c.User)
			}
			if want := []string{"/usr/local/bin/betcode-relay", "serve"}; !slices.Equal(c.Entrypoint, want) {
				t.Errorf("Entrypoint %q, want %q", c.Entrypoint, want)
			}
			if c.Healthcheck == nil || !slices.Equal(c.Healthcheck.Test, []string{"CMD", "/usr/local/bin/betcode-relay", "healthcheck"}) {
				t.Errorf("Healthcheck %+v: want CMD betcode-relay healthcheck", c.Healthcheck)
			} else if c.Healthcheck.Interval <= 0 || c.Healthcheck.Retries <= 0 {
				t.Errorf("Healthcheck %+v: no interval or retries", c.Healthcheck)
			}
			for _, e := range []string{"GODEBUG=adaptivestackstart=0", "BETCODE_RELAY_METRICS_LISTEN=:9090"} {
				if !slices.Contains(c.Env, e) {
					t.Errorf("Env %q lacks %s", c.Env, e)
				}
			}
			for _, port := range []string{"8443/tcp", "9090/tcp"} {
				if _, ok := c.ExposedPorts[port]; !ok {
					t.Errorf("ExposedPorts %v lacks %s", c.ExposedPorts, port)
				}
			}
			if c.StopSignal != "SIGTERM" {
				t.Errorf("StopSignal %q, want SIGTERM (starts the drain)", c.StopSignal)
			}
			if c.Labels["org.opencontainers.image.revision"] != cfg.Revision {
				t.Errorf("label revision %q, want %q", c.Labels["org.opencontainers.image.revision"], cfg.Revision)
			}
			if !cf.Created.Time.Equal(created) {
				t.Errorf("created %s, want the commit's time %s", cf.Created.Time, created)
			}
			if cf.OS+"/"+cf.Architecture != p {
				t.Errorf("config platform %s/%s, want %s", cf.OS, cf.Architecture, p)
			}
		})
	}
}

// file is one entry of an image's filesystem.
type file struct {
	hdr  *tar.Header
	data []byte
}

// files flattens img's layers.
func files(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out["/"+strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = file{h, b}
	}
}

func TestLayerIsMinimal(t *testing.T) {
	_, cfg := image(t)
	idx, _ := index(t, cfg.Layout)
	hostCA, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range cfg.Platforms {
		t.Run(p, func(t *testing.T) {
			fs := files(t, platformImage(t, idx, p))
			for _, shell := range []string{"/bin/sh", "/bin/bash", "/bin/busybox", "/usr/bin/sh", "/bin"} {
				if _, ok := fs[shell]; ok {
					t.Errorf("%s is in the image: it must have no shell", shell)
				}
			}
			bin, ok := fs["/usr/local/bin/betcode-relay"]
			if !ok {
				t.Fatal("no /usr/local/bin/betcode-relay")
			}
			if bin.hdr.Mode&0o111 == 0 || bin.hdr.Uid != 0 || bin.hdr.Mode&0o022 != 0 {
				t.Errorf("betcode-relay mode %o uid %d: want executable, owned by root, not writable by the relay", bin.hdr.Mode, bin.hdr.Uid)
			}
			if !strings.Contains(string(fs["/etc/passwd"].data), "nonroot:x:65532:65532:") {
				t.Errorf("/etc/passwd has no nonroot user 65532:\n%s", fs["/etc/passwd"].data)
			}
			if !bytes.Equal(fs["/etc/ssl/certs/ca-certificates.crt"].data, hostCA) {
				t.Error("/etc/ssl/certs/ca-certificates.crt is not the CA bundle the image was built with")
			}
			if h := fs["/home/nonroot"].hdr; h == nil || h.Uid != 65532 || h.Typeflag != tar.TypeDir {
				t.Errorf("/home/nonroot (the working directory): %+v, want a directory owned by 65532", h)
			}
			for name, f := range fs {
				if !f.hdr.ModTime.Equal(created) {
					t.Errorf("%s mtime %s, want the commit's time", name, f.hdr.ModTime)
				}
			}
			if len(fs) > 20 {
				t.Errorf("%d files in the image, want a handful", len(fs))
			}
		})
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// lockedBuffer is a bytes.Buffer a process writes to while the test reads.
type lockedBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	grew chan struct{} // a token after a Write, for waitFor
}

func newLockedBuffer() *lockedBuffer { return &lockedBuffer{grew: make(chan struct{}, 1)} }

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.b.Write(p)
	select {
	case b.grew <- struct{}{}:
	default:
	}
	return n, err
}

// waitFor waits until the buffer holds s, failing t when the process
// writing it ends first (exited closes) or d passes.
func (b *lockedBuffer) waitFor(t *testing.T, s string, exited <-chan struct{}, d time.Duration) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for !strings.Contains(b.String(), s) {
		select {
		case <-b.grew:
		case <-exited:
			if !strings.Contains(b.String(), s) { // the process's last writes are in
				t.Fatalf("the relay exited before logging %q:\n%s", s, b.String())
			}
		case <-deadline.C:
			t.Fatalf("no %q in the relay's log within %s:\n%s", s, d, b.String())
		}
	}
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestBinaryServesAndHealthcheck is the image's real proof without a
// container engine: the binary taken out of the layer runs as the image
// would run it (its entrypoint, its environment, as docker run -e would
// override the ports), and the image's health check command reports it
// healthy while it serves and unhealthy while it drains and once it is gone.
func TestBinaryServesAndHealthcheck(t *testing.T) {
	_, cfg := image(t)
	platform := "linux/" + runtime.GOARCH
	if !slices.Contains(cfg.Platforms, platform) {
		t.Fatalf("the image has no %s build to run here", platform)
	}
	idx, _ := index(t, cfg.Layout)
	img := platformImage(t, idx, platform)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "betcode-relay")
	if err := os.WriteFile(bin, files(t, img)[cf.Config.Entrypoint[0]].data, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), testVersion) {
		t.Fatalf("betcode-relay --version: %v: %q, want %s", err, out, testVersion)
	}
	pki := filepath.Join(dir, "pki")
	if out, err := exec.CommandContext(ctx, bin, "certs", "init", "--dir", pki).CombinedOutput(); err != nil {
		t.Fatalf("betcode-relay certs init: %v\n%s", err, out)
	}

	metrics := freeAddr(t)
	env := append(slices.Clone(cf.Config.Env),
		"BETCODE_RELAY_METRICS_LISTEN="+metrics, // as docker run -e: a port free on this shared host
		"BETCODE_RELAY_LISTEN="+freeAddr(t),
		"BETCODE_RELAY_TLS_CERT="+filepath.Join(pki, "relay.crt"),
		"BETCODE_RELAY_TLS_KEY="+filepath.Join(pki, "relay.key"),
		"BETCODE_RELAY_CLIENT_CA="+filepath.Join(pki, "ca.crt"),
		"HOME="+dir,
	)
	healthcheck := func() (string, error) {
		test := cf.Config.Healthcheck.Test
		cmd := exec.CommandContext(ctx, bin, test[2:]...) // {"CMD", the binary, args...}
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := healthcheck(); err == nil {
		t.Fatalf("healthcheck passed with no relay running: %s", out)
	}

	args := append(slices.Clone(cf.Config.Entrypoint[1:]), "--data-dir", filepath.Join(dir, "data"), "--drain-grace", "3s")
	relay := exec.Command(bin, args...)
	relay.Env, relay.Dir = env, dir
	stdout, stderr := newLockedBuffer(), newLockedBuffer()
	relay.Stdout, relay.Stderr = stdout, stderr
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	done := make(chan struct{}) // closed once the relay's process has been waited for
	go func() {
		defer close(done)
		exited <- relay.Wait()
	}()
	defer func() {
		relay.Process.Kill() // an error once it exited: nothing to do
		<-done
	}()

	// "relay serving" comes once the metrics listener, and /readyz on it,
	// is up.
	stderr.waitFor(t, "relay serving", done, 60*time.Second)
	if out, err := healthcheck(); err != nil {
		t.Fatalf("healthcheck failing once the relay serves: %v: %s\nrelay's log:\n%s", err, out, stderr.String())
	}

	// SIGTERM starts the drain (the image's StopSignal): not ready any
	// more ("relay: drained" comes after readiness went).
	if err := relay.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stderr.waitFor(t, "relay: drained", done, 60*time.Second)
	if _, err := healthcheck(); err == nil {
		t.Fatal("healthcheck still passing after SIGTERM")
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("relay exited with %v after SIGTERM\n%s", err, stderr.String())
		}
	case <-ctx.Done():
		t.Fatal("the relay did not exit after SIGTERM")
	}
	if out, err := healthcheck(); err == nil {
		t.Errorf("healthcheck passed once the relay exited: %s", out)
	}
	if strings.Contains(stderr.String(), "bct_") {
		t.Errorf("a token in the relay's log:\n%s", stderr.String())
	}
	// `docker run` on an empty store: the first administrator's sign-in,
	// once, on stdout.
	if out := stdout.String(); strings.Count(out, "bct_") != 1 || !strings.Contains(out, `relay administrator "admin"`) {
		t.Errorf("the relay's stdout on an empty store, want the first administrator's token once:\n%s", out)
	}
}

func TestSBOMReferrers(t *testing.T) {
	res, cfg := image(t)
	_, refs := index(t, cfg.Layout)
	lp, err := layout.FromPath(cfg.Layout)
	if err != nil {
		t.Fatal(err)
	}
	subjects := map[v1.Hash]bool{}
	for _, d := range refs {
		raw, err := lp.Bytes(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		var m v1.Manifest
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if m.ArtifactType != SBOMArtifactType || m.Subject == nil || len(m.Layers) != 1 || m.Layers[0].MediaType != SBOMArtifactType {
			t.Fatalf("SBOM manifest %s: %s", d.Digest, raw)
		}
		if m.Config.MediaType != "application/vnd.oci.empty.v1+json" {
			t.Errorf("SBOM manifest's config %s, want the OCI 1.1 empty descriptor", m.Config.MediaType)
		}
		subjects[m.Subject.Digest] = true
		doc, err := lp.Bytes(m.Layers[0].Digest)
		if err != nil {
			t.Fatal(err)
		}
		var bom struct {
			BOMFormat, SpecVersion string
			Metadata               struct {
				Component struct{ Name, Version string }
			}
			Components []struct{ Name, Version, Purl string }
		}
		if err := json.Unmarshal(doc, &bom); err != nil {
			t.Fatal(err)
		}
		if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Name != "github.com/betcode-dev/betcode/relay" || bom.Metadata.Component.Version != testVersion {
			t.Errorf("SBOM %s: format %q, component %+v", m.Layers[0].Digest, bom.BOMFormat, bom.Metadata.Component)
		}
		names := map[string]string{}
		for _, c := range bom.Components {
			names[c.Name] = c.Purl
		}
		for _, mod := range []string{"github.com/jackc/pgx/v5", "google.golang.org/grpc", "modernc.org/sqlite", "github.com/betcode-dev/betcode/shared", "std"} {
			if _, ok := names[mod]; !ok {
				t.Errorf("the SBOM does not name %s (it names %d components)", mod, len(names))
			}
		}
		if p := names["github.com/jackc/pgx/v5"]; !strings.HasPrefix(p, "pkg:golang/github.com/jackc/pgx/v5@v") {
			t.Errorf("pgx's purl %q", p)
		}
	}
	for _, p := range cfg.Platforms {
		if !subjects[res.Images[p]] {
			t.Errorf("no SBOM referrer for the %s image %s", p, res.Images[p])
		}
	}
}

func TestReproducible(t *testing.T) {
	res, cfg := image(t)
	again := testConfig(filepath.Join(workDir, "b"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res2, err := Build(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Index != res.Index {
		t.Errorf("built twice: index %s, then %s", res.Index, res2.Index)
	}
	a, err := os.ReadFile(cfg.Archive)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(again.Archive)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("built twice: the oci-archives differ (%d and %d bytes)", len(a), len(b))
	}
}
