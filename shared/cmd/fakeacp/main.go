// Command fakeacp is the scriptable fake ACP agent of package fakeacp on
// stdio, for demos and manual runs of the acp provider:
//
//	betcode-agent serve --acp-agent fake='fakeacp --state /tmp/fakeacp'
//
// Its prompts' keywords (package fakeacp) choose what a turn does.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/betcode-dev/betcode/shared/fakeacp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs := flag.NewFlagSet("fakeacp", flag.ContinueOnError)
	state := fs.String("state", "", "keep sessions in `dir`, for session/load")
	noLoad := fs.Bool("no-load", false, "do not advertise session/load")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if err := fakeacp.Serve(ctx, os.Stdin, os.Stdout, fakeacp.Config{StateDir: *state, NoLoad: *noLoad, Stderr: os.Stderr}); err != nil {
		fmt.Fprintln(os.Stderr, "fakeacp:", err)
		os.Exit(1)
	}
}
