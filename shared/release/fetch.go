package release

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// DefaultBaseURL is where scripts/install.sh and `betcode-agent update`
// download the newest release from.
const DefaultBaseURL = "https://github.com/betcode-dev/betcode/releases/latest/download"

// Fetcher downloads a release from a base URL and verifies it.
type Fetcher struct {
	BaseURL        string       // the release directory's URL
	AllowedSigners []byte       // default AllowedSigners
	Client         *http.Client // default http.DefaultClient
}

// Release is a release's verified checksums and the archive of one binary
// for one platform.
type Release struct {
	Version string
	Archive string // its file name
	Sums    Checksums
}

// maxChecksums bounds checksums.txt and its signature.
const maxChecksums = 1 << 20

// Find downloads checksums.txt and its signature, verifies them and finds
// the archive of binary for goos/goarch.
func (f Fetcher) Find(ctx context.Context, binary, goos, goarch string) (Release, error) {
	sums, err := f.get(ctx, "checksums.txt", maxChecksums)
	if err != nil {
		return Release{}, err
	}
	sig, err := f.get(ctx, "checksums.txt.sig", maxChecksums)
	if err != nil {
		return Release{}, err
	}
	signers := f.AllowedSigners
	if signers == nil {
		signers = AllowedSigners
	}
	if err := Verify(ctx, sums, sig, signers); err != nil {
		return Release{}, fmt.Errorf("%s: %w", f.BaseURL, err)
	}
	c, err := ParseChecksums(sums)
	if err != nil {
		return Release{}, err
	}
	name, version, err := c.Archive(binary, goos, goarch)
	if err != nil {
		return Release{}, fmt.Errorf("%s: %w", f.BaseURL, err)
	}
	return Release{Version: version, Archive: name, Sums: c}, nil
}

// Binary downloads r's archive, checks it against checksums.txt and returns
// the file exe inside it.
func (f Fetcher) Binary(ctx context.Context, r Release, exe string) ([]byte, error) {
	data, err := f.get(ctx, r.Archive, maxBinary)
	if err != nil {
		return nil, err
	}
	if err := r.Sums.Check(r.Archive, data); err != nil {
		return nil, err
	}
	return ExtractFile(r.Archive, data, exe)
}

// get downloads one file of the release, at most limit bytes.
func (f Fetcher) get(ctx context.Context, name string, limit int64) ([]byte, error) {
	url := strings.TrimSuffix(f.BaseURL, "/") + "/" + name
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", url, err)
	}
	client := f.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", url, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("download %s: larger than %d bytes", url, limit)
	}
	return b, nil
}
