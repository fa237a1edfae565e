package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

func newSendCmd(g *globals) *cobra.Command {
	var session, key string
	cmd := &cobra.Command{
		Use:   "send --session ID MESSAGE...",
		Short: "Send one message to a session without waiting for the answer",
		Long: `Send one message to an existing session and return. Through a relay the message
is buffered when the machine is offline and delivered, once, when it reconnects.
To a paired machine that is offline, the message is sealed to the machine's key
first (docs/security.md): the relay stores only ciphertext.
Follow the answer with: betcode replay ID --follow`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ch, err := g.pairedTarget()
			if err != nil {
				return err
			}
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			if key == "" {
				if key, err = e2ee.NewSealedID(); err != nil {
					return err
				}
			}
			text := strings.Join(args, " ")
			resp, err := pb.NewAgentServiceClient(conn).QueueMessage(cmd.Context(), &pb.QueueMessageRequest{
				SessionId: session, Message: &pb.UserMessage{Content: text}, IdempotencyKey: key,
			})
			if err != nil && ch != nil && status.Code(err) == codes.Unavailable {
				// The channel did not open: the machine may be offline.
				// A sealed envelope waits for it on the relay.
				return sendSealed(cmd.Context(), cmd.OutOrStdout(), *ch, session, text, key, err)
			}
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

// sendSealed queues text to a paired machine whose channel would not open
// (chanErr) as a sealed envelope through the relay. If that fails too,
// the channel's error is the one to show.
func sendSealed(ctx context.Context, out io.Writer, ch client.Channel, session, text, key string, chanErr error) error {
	resp, err := client.DeliverSealed(ctx, ch, e2ee.Sealed{ID: client.SealedID(key), Kind: e2ee.SealedQueue, SessionID: session, Text: text})
	if err != nil {
		// status.Code sees through the wrapping.
		if status.Code(err) == codes.AlreadyExists {
			fmt.Fprintln(out, "already sent earlier (same --key); nothing done")
			return nil
		}
		if status.Code(err) == codes.Unavailable {
			return chanErr
		}
		return err
	}
	if resp.Buffered {
		fmt.Fprintln(out, "machine offline: message sealed and queued on the relay; it will be delivered when the machine reconnects")
		return nil
	}
	fmt.Fprintln(out, "sent (sealed; the machine took it)")
	return nil
}
