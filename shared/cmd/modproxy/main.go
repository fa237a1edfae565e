// Command modproxy writes a file:// GOPROXY directory holding modules of
// this repository at given versions (make tidy; docs/upgrading.md):
//
//	modproxy -dir /tmp/proxy [-rev HEAD] shared=v0.2.0 agent=v0.2.0
//
// It prints the GOPROXY entry (file:///tmp/proxy).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/betcode-dev/betcode/shared/internal/modproxy"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run() error {
	p := &modproxy.Proxy{}
	flag.StringVar(&p.Dir, "dir", "", "the proxy directory to write (required)")
	flag.StringVar(&p.Repo, "repo", ".", "the repository's root")
	flag.StringVar(&p.Rev, "rev", "", "the git revision to take the modules from (default: the working tree)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: modproxy -dir DIR [-repo ROOT] [-rev REV] moduledir=version...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if p.Dir == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	for _, arg := range flag.Args() {
		dir, version, ok := strings.Cut(arg, "=")
		if !ok {
			return fmt.Errorf("%q: want moduledir=version, e.g. shared=v0.2.0", arg)
		}
		if _, err := p.Add(ctx, modproxy.Module{Dir: dir, Version: version}); err != nil {
			return err
		}
	}
	fmt.Println(p.URL())
	return nil
}
