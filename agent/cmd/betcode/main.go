// Command betcode is the BetCode client: chat with Claude Code on a machine
// running betcode-agent, list its sessions and replay them. Exit codes follow
// the spec's table (0 ok, 1 agent error, 2 connection, 3 permission,
// 4 rate limited, 5 invalid arguments, 6 session not found, 7 internal).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/betcode-dev/betcode/agent/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := newRootCmd().ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "betcode:", err)
	}
	os.Exit(client.ExitCode(err))
}
