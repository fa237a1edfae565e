package release

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Binary is one command a release ships.
type Binary struct {
	Name   string // betcode-agent
	Module string // its Go module's directory under the repository root: agent
	Main   string // its main package inside the module: cmd/betcode-agent
}

// Binaries are the commands of a release.
var Binaries = []Binary{
	{Name: "betcode-agent", Module: "agent", Main: "cmd/betcode-agent"},
	{Name: "betcode", Module: "agent", Main: "cmd/betcode"},
	{Name: "betcode-relay", Module: "relay", Main: "cmd/betcode-relay"},
}

// Target is one archive to build: a binary for a platform.
type Target struct {
	Binary       Binary
	GOOS, GOARCH string
}

// Targets is make release's matrix: every binary for linux and darwin on
// amd64 and arm64, and the client (betcode) for windows/amd64.
func Targets() []Target {
	var ts []Target
	for _, goos := range []string{"linux", "darwin"} {
		for _, goarch := range []string{"amd64", "arm64"} {
			for _, b := range Binaries {
				ts = append(ts, Target{b, goos, goarch})
			}
		}
	}
	return append(ts, Target{Binaries[1], "windows", "amd64"})
}

// Config says what Build makes and where.
type Config struct {
	Root    string    // the repository's root (it holds go.work)
	Out     string    // the release directory; emptied first
	Version string    // stamped as main.version and in the archives' names
	Time    time.Time // every date inside the artefacts: the commit's time
	Targets []Target  // default Targets()
	// SigningKey is the Ed25519 private key that signs checksums.txt. Empty
	// makes a throwaway key in Out (Dev in the result) and writes the
	// allowed_signers that trusts it to Out/allowed_signers.
	SigningKey string
	// CycloneDX is the cyclonedx-gomod binary that writes the SBOMs.
	CycloneDX string
	Env       []string  // added to the go commands' environment (GOCACHE, GOFLAGS)
	Log       io.Writer // progress, a line per step; nil for none
}

// Result is what Build made.
type Result struct {
	Files []string // the release directory's files, sorted
	Dev   bool     // signed with a throwaway development key
}

// DevKeyFile and DevSignersFile are the throwaway key and its
// allowed_signers in the release directory of a build without a key.
const (
	DevKeyFile     = "dev-signing-key"
	DevSignersFile = "allowed_signers"
)

// Build makes a release directory (see the package doc).
func Build(ctx context.Context, c Config) (Result, error) {
	if c.Version == "" || strings.ContainsAny(c.Version, "_/ ") {
		return Result{}, fmt.Errorf("version %q: want a non-empty version without _, / or spaces", c.Version)
	}
	if c.CycloneDX == "" {
		return Result{}, errors.New("no cyclonedx-gomod to write the SBOMs with (make test-deps installs it)")
	}
	if c.Targets == nil {
		c.Targets = Targets()
	}
	root, err := filepath.Abs(c.Root)
	if err != nil {
		return Result{}, fmt.Errorf("repository root: %w", err)
	}
	c.Root = root
	logf := func(format string, a ...any) {
		if c.Log != nil {
			fmt.Fprintf(c.Log, format+"\n", a...)
		}
	}
	if err := os.RemoveAll(c.Out); err != nil {
		return Result{}, fmt.Errorf("empty %s: %w", c.Out, err)
	}
	work := filepath.Join(c.Out, ".build")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return Result{}, fmt.Errorf("create %s: %w", work, err)
	}
	sums := Checksums{}
	for _, t := range c.Targets {
		archive := ArchiveName(t.Binary.Name, c.Version, t.GOOS, t.GOARCH)
		logf("build %s", archive)
		bin, err := c.goBuild(ctx, t, work)
		if err != nil {
			return Result{}, err
		}
		exe := t.Binary.Name
		if t.GOOS == "windows" {
			exe += ".exe"
		}
		var buf bytes.Buffer
		if err := WriteArchive(&buf, t.GOOS, []File{{Name: exe, Mode: 0o755, Data: bin}}, c.Time); err != nil {
			return Result{}, fmt.Errorf("archive %s: %w", archive, err)
		}
		if err := c.write(archive, buf.Bytes(), sums); err != nil {
			return Result{}, err
		}
		sbom, err := c.sbom(ctx, t)
		if err != nil {
			return Result{}, err
		}
		if err := c.write(archive+".cdx.json", sbom, sums); err != nil {
			return Result{}, err
		}
	}
	if err := os.RemoveAll(work); err != nil {
		return Result{}, err
	}
	checksums := filepath.Join(c.Out, "checksums.txt")
	if err := os.WriteFile(checksums, sums.Format(), 0o644); err != nil {
		return Result{}, fmt.Errorf("write checksums.txt: %w", err)
	}
	res := Result{}
	key := c.SigningKey
	if key == "" {
		res.Dev = true
		key = filepath.Join(c.Out, DevKeyFile)
		line, err := DevKey(ctx, key)
		if err != nil {
			return Result{}, err
		}
		if err := os.WriteFile(filepath.Join(c.Out, DevSignersFile), line, 0o644); err != nil {
			return Result{}, fmt.Errorf("write %s: %w", DevSignersFile, err)
		}
	}
	if err := Sign(ctx, key, checksums); err != nil {
		return Result{}, err
	}
	ents, err := os.ReadDir(c.Out)
	if err != nil {
		return Result{}, err
	}
	for _, e := range ents {
		res.Files = append(res.Files, e.Name())
	}
	return res, nil
}

// write stores a release file and records its checksum.
func (c Config) write(name string, data []byte, sums Checksums) error {
	if err := os.WriteFile(filepath.Join(c.Out, name), data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	sums[name] = sha256Hex(data)
	return nil
}

// env is the go commands' environment for a target.
func (c Config) env(t Target) []string {
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.GOOS, "GOARCH="+t.GOARCH,
		"GOWORK="+filepath.Join(c.Root, "go.work"), "GOFLAGS=-mod=readonly",
		fmt.Sprintf("SOURCE_DATE_EPOCH=%d", c.Time.Unix()))
	return append(env, c.Env...)
}

// goBuild compiles a target into work and returns the binary.
func (c Config) goBuild(ctx context.Context, t Target, work string) ([]byte, error) {
	out := filepath.Join(work, t.GOOS+"_"+t.GOARCH+"_"+t.Binary.Name)
	ldflags := "-s -w -buildid= -X main.version=" + c.Version
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out,
		"./"+t.Binary.Module+"/"+t.Binary.Main)
	cmd.Dir = c.Root
	cmd.Env = c.env(t)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s for %s/%s: %w\n%s", t.Binary.Name, t.GOOS, t.GOARCH, err, msg)
	}
	return os.ReadFile(out)
}

// sbom writes a target's CycloneDX SBOM with cyclonedx-gomod app, with no
// serial number nor timestamp so that it is reproducible too.
func (c Config) sbom(ctx context.Context, t Target) ([]byte, error) {
	f, err := os.CreateTemp("", "betcode-sbom-*.json")
	if err != nil {
		return nil, fmt.Errorf("sbom: %w", err)
	}
	path := f.Name()
	f.Close()
	defer os.Remove(path)
	cmd := exec.CommandContext(ctx, c.CycloneDX, "app", "-json", "-noserial", "-notimestamp",
		"-main", t.Binary.Main, "-output", path, t.Binary.Module)
	cmd.Dir = c.Root
	cmd.Env = c.env(t)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("cyclonedx-gomod app %s for %s/%s: %w\n%s", t.Binary.Name, t.GOOS, t.GOARCH, err, msg)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sbom: %w", err)
	}
	sbom, err := portableSBOM(b)
	if err != nil {
		return nil, fmt.Errorf("cyclonedx-gomod's SBOM of %s %s/%s: %w", t.Binary.Name, t.GOOS, t.GOARCH, err)
	}
	return sbom, nil
}

// portableSBOM checks that b is a CycloneDX document and drops what would
// differ between two machines building the same commit: the hashes of the
// cyclonedx-gomod binary in metadata.tools (go install stamps paths into
// it). The tool's name and version stay.
func portableSBOM(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if doc["bomFormat"] != "CycloneDX" {
		return nil, fmt.Errorf("bomFormat %v, want CycloneDX", doc["bomFormat"])
	}
	if md, ok := doc["metadata"].(map[string]any); ok {
		tools, _ := md["tools"].([]any)
		for _, tl := range tools {
			if m, ok := tl.(map[string]any); ok {
				delete(m, "hashes")
			}
		}
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
