// Package modproxy writes a GOPROXY directory (served as file://) holding
// this repository's modules at chosen versions, so that `go install
// module/cmd@version` and `go mod tidy` of one module can be run and tested
// without the modules being tagged or published: the layout is the one the
// GOPROXY protocol names (<module>/@v/list, .info, .mod, .zip).
package modproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// Module is one module of the repository to put into the proxy.
type Module struct {
	// Dir is the module's directory relative to the repository root
	// ("shared", "agent").
	Dir string
	// Version is the version it is published at ("v0.2.0").
	Version string
}

// Proxy is a GOPROXY directory being written.
type Proxy struct {
	// Dir is the proxy's directory; GOPROXY=file://Dir serves it.
	Dir string
	// Repo is the git repository's root the modules come from.
	Repo string
	// Rev is the git revision the modules are taken from ("HEAD"); empty
	// takes the working tree's files as they are, tracked or not.
	Rev string
}

// URL is the proxy's GOPROXY entry.
func (p *Proxy) URL() string { return "file://" + filepath.ToSlash(p.Dir) }

// Add writes module m into the proxy and returns its module path.
func (p *Proxy) Add(ctx context.Context, m Module) (string, error) {
	gomod, err := p.read(ctx, filepath.Join(m.Dir, "go.mod"))
	if err != nil {
		return "", err
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return "", fmt.Errorf("%s/go.mod names no module", m.Dir)
	}
	mv := module.Version{Path: path, Version: m.Version}
	if err := module.Check(path, m.Version); err != nil {
		return "", fmt.Errorf("module %s: %w", m.Dir, err)
	}
	esc, err := module.EscapePath(path)
	if err != nil {
		return "", fmt.Errorf("module %s: %w", path, err)
	}
	dir := filepath.Join(p.Dir, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("proxy directory: %w", err)
	}
	zf, err := os.Create(filepath.Join(dir, m.Version+".zip"))
	if err != nil {
		return "", fmt.Errorf("module zip: %w", err)
	}
	if p.Rev == "" {
		err = modzip.CreateFromDir(zf, mv, filepath.Join(p.Repo, m.Dir))
	} else {
		err = modzip.CreateFromVCS(zf, mv, p.Repo, p.Rev, m.Dir)
	}
	if cerr := zf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("zip %s@%s: %w", path, m.Version, err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, m.Version+".info"), info, 0o644); err != nil {
		return "", fmt.Errorf("module info: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, m.Version+".mod"), gomod, 0o644); err != nil {
		return "", fmt.Errorf("module go.mod: %w", err)
	}
	list, err := os.OpenFile(filepath.Join(dir, "list"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return "", fmt.Errorf("version list: %w", err)
	}
	_, err = fmt.Fprintln(list, m.Version)
	if cerr := list.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("version list: %w", err)
	}
	return path, nil
}

// read returns file name (relative to the repository) at p.Rev, or from
// the working tree when Rev is empty.
func (p *Proxy) read(ctx context.Context, name string) ([]byte, error) {
	if p.Rev == "" {
		b, err := os.ReadFile(filepath.Join(p.Repo, name))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		return b, nil
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", "-C", p.Repo, "show", p.Rev+":"+filepath.ToSlash(name))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git show %s:%s: %w: %s", p.Rev, name, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Required returns the version of module path that dir's go.mod (relative
// to the repository, at p.Rev) requires, or "" when it does not.
func (p *Proxy) Required(ctx context.Context, dir, path string) (string, error) {
	gomod, err := p.read(ctx, filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	f, err := modfile.ParseLax(filepath.Join(dir, "go.mod"), gomod, nil)
	if err != nil {
		return "", fmt.Errorf("parse %s/go.mod: %w", dir, err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == path {
			return r.Mod.Version, nil
		}
	}
	return "", nil
}
