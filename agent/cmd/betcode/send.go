package main

import (
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func newSendCmd(g *globals) *cobra.Command {
	var session, key string
	cmd := &cobra.Command{
		Use:   "send --session ID MESSAGE...",
		Short: "Send one message to a session without waiting for the answer",
		Long: `Send one message to an existing session and return. Through a relay the message
is buffered when the machine is offline and delivered, once, when it reconnects.
Follow the answer with: betcode replay ID --follow`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			if key == "" {
				key = uuid.NewString()
			}
			resp, err := pb.NewAgentServiceClient(conn).QueueMessage(cmd.Context(), &pb.QueueMessageRequest{
				SessionId: session, Message: &pb.UserMessage{Content: strings.Join(args, " ")}, IdempotencyKey: key,
			})
			if err != nil {
				return err
			}
			switch {
			case resp.Buffered:
				fmt.Fprintln(cmd.OutOrStdout(), "machine offline: message buffered on the relay; it is delivered when the machine reconnects")
			case resp.Duplicate:
				fmt.Fprintln(cmd.OutOrStdout(), "already sent earlier (same --key); nothing done")
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "sent (session at sequence %d)\n", resp.Sequence)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "the session (required)")
	cmd.Flags().StringVar(&key, "key", "", "idempotency key (default: a new random one); resending with the same key does nothing")
	_ = cmd.MarkFlagRequired("session")
	return cmd
}
