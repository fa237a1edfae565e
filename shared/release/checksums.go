package release

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// Checksums maps a file name of a release to its SHA-256, in hex.
type Checksums map[string]string

// ParseChecksums reads checksums.txt (sha256sum's format: "HEX  NAME").
func ParseChecksums(data []byte) (Checksums, error) {
	c := Checksums{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != sha256.Size*2 || name == "" || strings.ContainsAny(name, "/\\") {
			return nil, fmt.Errorf("checksums.txt line %d: want \"SHA256  NAME\", got %.80q", n, line)
		}
		if _, err := hex.DecodeString(sum); err != nil {
			return nil, fmt.Errorf("checksums.txt line %d: %w", n, err)
		}
		c[name] = sum
	}
	return c, sc.Err()
}

// Format renders c as checksums.txt, sorted by name.
func (c Checksums) Format() []byte {
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&b, "%s  %s\n", c[n], n)
	}
	return b.Bytes()
}

// Check reports whether data is the file name of c.
func (c Checksums) Check(name string, data []byte) error {
	want, ok := c[name]
	if !ok {
		return fmt.Errorf("%s is not in checksums.txt", name)
	}
	if got := sha256Hex(data); got != want {
		return fmt.Errorf("%s: SHA-256 %s does not match checksums.txt (%s): the download is corrupt or was tampered with", name, got, want)
	}
	return nil
}

// Archive finds the archive of binary for goos/goarch in c and returns its
// name and the release's version.
func (c Checksums) Archive(binary, goos, goarch string) (name, version string, err error) {
	for n := range c {
		v, ok := parseArchiveName(n, binary, goos, goarch)
		if ok {
			return n, v, nil
		}
	}
	return "", "", fmt.Errorf("the release has no %s for %s/%s", binary, goos, goarch)
}

// parseArchiveName splits BINARY_VERSION_OS_ARCH.EXT.
func parseArchiveName(name, binary, goos, goarch string) (string, bool) {
	rest, ok := strings.CutPrefix(name, binary+"_")
	if !ok {
		return "", false
	}
	rest, ok = strings.CutSuffix(rest, "_"+goos+"_"+goarch+archiveExt(goos))
	if !ok || rest == "" || strings.Contains(rest, "_") {
		return "", false
	}
	return rest, true
}

// sha256Hex is the hex SHA-256 of data, as checksums.txt holds it.
func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
