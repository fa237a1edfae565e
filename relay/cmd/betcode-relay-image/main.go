// Command betcode-relay-image builds the relay's container image without
// Docker (relay/internal/image): an OCI image index for linux/amd64 and
// linux/arm64, non-root, no shell, its health check built in and its SBOM
// attached, written as an OCI layout directory and an oci-archive tar.
// `make image` runs it from the repository's root; docs/deploy.md says how
// to load and push the result.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/betcode-dev/betcode/relay/internal/image"
)

func main() {
	var c image.Config
	var platforms, created string
	flag.StringVar(&c.RelayDir, "relay-dir", "relay", "the relay module's directory")
	flag.StringVar(&c.Layout, "out", "dist/image", "OCI image layout directory to write (replaced)")
	flag.StringVar(&c.Archive, "archive", "dist/betcode-relay-image.oci.tar", "the layout as one tar (oci-archive); empty: none")
	flag.StringVar(&platforms, "platforms", strings.Join(image.DefaultPlatforms, ","), "comma-separated linux/ARCH list")
	flag.StringVar(&c.Version, "version", "dev", "the relay's version (binary and labels)")
	flag.StringVar(&c.Revision, "revision", "", "the commit (label org.opencontainers.image.revision)")
	flag.StringVar(&c.Source, "source", "https://github.com/betcode-dev/betcode", "the repository (label org.opencontainers.image.source)")
	flag.StringVar(&created, "created", os.Getenv("SOURCE_DATE_EPOCH"), "creation time, Unix seconds or RFC 3339: the commit's time (default $SOURCE_DATE_EPOCH)")
	flag.StringVar(&c.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to copy into the image")
	flag.Parse()
	c.Platforms = strings.Split(platforms, ",")
	c.Log = os.Stderr
	if err := run(&c, created); err != nil {
		fmt.Fprintln(os.Stderr, "betcode-relay-image:", err)
		os.Exit(1)
	}
}

func run(c *image.Config, created string) error {
	t, err := parseTime(created)
	if err != nil {
		return err
	}
	c.Created = t
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := image.Build(ctx, *c)
	if err != nil {
		return err
	}
	fmt.Printf("image index %s (%s) in %s", res.Index, c.Version, c.Layout)
	if c.Archive != "" {
		fmt.Printf(" and %s", c.Archive)
	}
	fmt.Println()
	for _, p := range c.Platforms {
		fmt.Printf("  %s: %s, SBOM %s\n", p, res.Images[p], res.SBOMs[p])
	}
	return nil
}

// parseTime reads Unix seconds or RFC 3339.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, fmt.Errorf("no --created: pass the commit's time, e.g. --created $(git log -1 --format=%%ct)")
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--created %q: want Unix seconds or RFC 3339", s)
	}
	return t.UTC(), nil
}
