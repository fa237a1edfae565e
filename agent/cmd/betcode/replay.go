package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func newReplayCmd(g *globals) *cobra.Command {
	var from uint64
	var asJSON, follow bool
	cmd := &cobra.Command{
		Use:   "replay SESSION_ID",
		Short: "Print a session's events from a sequence on (default: all)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx := cmd.Context()
			if follow {
				ctx = metadata.AppendToOutgoingContext(ctx, "x-betcode-follow", "true")
			}
			r := &client.Renderer{Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}
			// A stream that drops (a relay replica draining, say) resumes
			// after the last event printed, with one line on stderr.
			noticed := false
			return client.Replay(ctx, pb.NewAgentServiceClient(conn), &pb.ResumeSessionRequest{SessionId: args[0], FromSequence: from},
				func(ev *pb.AgentEvent) error {
					noticed = false
					if asJSON {
						b, _ := protojson.MarshalOptions{}.Marshal(ev)
						fmt.Fprintln(cmd.OutOrStdout(), string(b))
						return nil
					}
					r.Event(ev)
					return nil
				}, func(err error, _ time.Duration) {
					if !noticed {
						noticed = true
						fmt.Fprintf(cmd.ErrOrStderr(), "[stream interrupted: %s; resuming]\n", shortErr(err))
					}
				})
		},
	}
	cmd.Flags().Uint64Var(&from, "from", 0, "replay events after this sequence")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print events as JSON, one per line")
	cmd.Flags().BoolVar(&follow, "follow", false, "keep streaming live events after the session goes idle")
	return cmd
}
