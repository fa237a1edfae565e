// Command fakeapi serves the keyword-driven fake Anthropic Messages API of
// package fakeapi, for demos and manual runs of the Claude Code CLI:
//
//	fakeapi --listen 127.0.0.1:8787
//	ANTHROPIC_BASE_URL=$(that URL) ANTHROPIC_API_KEY=sk-test claude -p ...
//
// It prints the base URL on stdout, logs every request on stderr and runs
// until interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/betcode-dev/betcode/shared/fakeapi"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fakeapi:", err)
		os.Exit(1)
	}
}

// Run starts the fake API as asked by args, prints its URL on stdout and
// serves until ctx ends.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fakeapi", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	dump := fs.String("dump", "", "write every /v1/messages request body to `dir`/NNN.json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg := fakeapi.Config{Addr: *listen, Logger: log}
	if *dump != "" {
		if err := os.MkdirAll(*dump, 0o755); err != nil {
			return err
		}
		cfg.Responder = func(req *fakeapi.Request) fakeapi.Reply {
			name := filepath.Join(*dump, fmt.Sprintf("%03d.json", req.Seq))
			if err := os.WriteFile(name, req.Body, 0o644); err != nil {
				log.Warn("dump request body", "err", err)
			}
			return fakeapi.KeywordReply(req)
		}
	}
	srv, err := fakeapi.Start(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, srv.URL())
	<-ctx.Done()
	return srv.Close()
}
