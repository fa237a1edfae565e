// Command betcode-release builds and verifies BetCode's release artefacts
// (make release, make verify-release; docs/releasing.md):
//
//	betcode-release build  -out dist -version v1.2.3 [-signing-key KEY] [-targets linux/amd64,...]
//	betcode-release verify -dir dist [-allowed-signers FILE]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/betcode-dev/betcode/shared/release"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "betcode-release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: betcode-release build|verify [flags] (-h for each)")
	}
	switch args[0] {
	case "build":
		return build(ctx, args[1:])
	case "verify":
		return verify(ctx, args[1:])
	}
	return fmt.Errorf("unknown command %q: want build or verify", args[0])
}

func build(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	root := fs.String("root", ".", "the repository's root (where go.work is)")
	out := fs.String("out", "dist", "the release directory (emptied first)")
	version := fs.String("version", "", "the release's version (make release: git describe)")
	epoch := fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "seconds since 1970 dating every artefact (default: the last commit's time)")
	key := fs.String("signing-key", "", "the Ed25519 private key that signs checksums.txt (default: a throwaway development key)")
	cdx := fs.String("cyclonedx", "", "cyclonedx-gomod (default: on PATH or in ~/.cache/betcode/bin)")
	targets := fs.String("targets", "", "comma-separated OS/ARCH to build, e.g. linux/amd64 (default: the whole matrix)")
	binaries := fs.String("binaries", "", "comma-separated binaries to build, e.g. betcode-agent (default: all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c := release.Config{Root: *root, Out: *out, Version: *version, SigningKey: *key, CycloneDX: *cdx, Log: os.Stderr}
	if c.Version == "" {
		return errors.New("-version is required")
	}
	t, err := sourceDate(ctx, *root, *epoch)
	if err != nil {
		return err
	}
	c.Time = t
	if c.CycloneDX == "" {
		c.CycloneDX = findTool("cyclonedx-gomod")
	}
	if *targets != "" || *binaries != "" {
		platforms, bins := set(*targets), set(*binaries)
		c.Targets = []release.Target{}
		for _, t := range release.Targets() {
			if (platforms == nil || platforms[t.GOOS+"/"+t.GOARCH]) && (bins == nil || bins[t.Binary.Name]) {
				c.Targets = append(c.Targets, t)
			}
		}
		if len(c.Targets) == 0 {
			return fmt.Errorf("-targets %q -binaries %q: nothing of the release matrix", *targets, *binaries)
		}
	}
	start := time.Now()
	res, err := release.Build(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "release %s in %s: %d files (%s), dated %s\n", c.Version, c.Out, len(res.Files),
		time.Since(start).Round(time.Second), c.Time.UTC().Format(time.RFC3339))
	if res.Dev {
		fmt.Fprintf(os.Stderr, `
!!! This release is signed with a THROWAWAY DEVELOPMENT KEY (%s), not the
!!! project's release key: only %s trusts it. Publish nothing
!!! from it. Sign a real release with RELEASE_SIGNING_KEY=path (docs/releasing.md).
`, filepath.Join(c.Out, release.DevKeyFile), filepath.Join(c.Out, release.DevSignersFile))
	}
	return nil
}

// set splits a comma-separated list; nil for an empty one.
func set(list string) map[string]bool {
	if list == "" {
		return nil
	}
	m := map[string]bool{}
	for _, p := range strings.Split(list, ",") {
		m[strings.TrimSpace(p)] = true
	}
	return m
}

// sourceDate is the time every artefact carries: SOURCE_DATE_EPOCH, else
// the last commit's time.
func sourceDate(ctx context.Context, root, epoch string) (time.Time, error) {
	if epoch == "" {
		out, err := exec.CommandContext(ctx, "git", "-C", root, "log", "-1", "--format=%ct").Output()
		if err != nil {
			return time.Time{}, fmt.Errorf("the last commit's time (set SOURCE_DATE_EPOCH outside git): %w", err)
		}
		epoch = strings.TrimSpace(string(out))
	}
	s, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", epoch, err)
	}
	return time.Unix(s, 0).UTC(), nil
}

// findTool looks a tool up on PATH, then in make test-deps' directory.
func findTool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cache", "betcode", "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func verify(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	dir := fs.String("dir", "dist", "the release directory")
	signers := fs.String("allowed-signers", "", "allowed_signers file (default: DIR/allowed_signers of a development build, else the project's key)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	allowed := release.AllowedSigners
	from := "the project's release key"
	path := *signers
	if path == "" {
		if p := filepath.Join(*dir, release.DevSignersFile); fileExists(p) {
			path = p
			fmt.Fprintf(os.Stderr, "!!! %s is a development build: checking it with its own throwaway key (%s)\n", *dir, p)
		}
	}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read allowed signers: %w", err)
		}
		allowed, from = b, path
	}
	n, err := release.VerifyDir(ctx, *dir, allowed)
	if err != nil {
		return fmt.Errorf("%s does not verify: %w", *dir, err)
	}
	fmt.Printf("%s: signature of checksums.txt good (%s); %d archives and their SBOMs match checksums.txt\n", *dir, from, n)
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
