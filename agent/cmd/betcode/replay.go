package main

import (
	"errors"
	"fmt"
	"io"

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
			stream, err := pb.NewAgentServiceClient(conn).ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: args[0], FromSequence: from})
			if err != nil {
				return err
			}
			r := &client.Renderer{Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}
			for {
				ev, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				if asJSON {
					b, _ := protojson.MarshalOptions{}.Marshal(ev)
					fmt.Fprintln(cmd.OutOrStdout(), string(b))
					continue
				}
				r.Event(ev)
			}
		},
	}
	cmd.Flags().Uint64Var(&from, "from", 0, "replay events after this sequence")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print events as JSON, one per line")
	cmd.Flags().BoolVar(&follow, "follow", false, "keep streaming live events after the session goes idle")
	return cmd
}
