package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Session sharing (ShareService, docs/security.md "Sharing a session"):
// share, unshare and shares under `betcode session`.

// shareCall dials and runs fn with a ShareService client.
func shareCall(cmd *cobra.Command, g *globals, what string, fn func(context.Context, pb.ShareServiceClient) error) error {
	conn, err := g.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	return rpcError(what, fn(cmd.Context(), pb.NewShareServiceClient(conn)))
}

// parseUntil reads --until: a duration from now ("2h", "90m") or an
// RFC 3339 time; "" is the machine's default (24 h).
func parseUntil(s string, now time.Time) (*timestamppb.Timestamp, error) {
	if s == "" {
		return nil, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return nil, fmt.Errorf("--until %s: a share must end in the future", s)
		}
		return timestamppb.New(now.Add(d)), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, fmt.Errorf("--until %q: give a duration (2h, 90m) or a time (2026-12-24T18:00:00Z)", s)
	}
	if !t.After(now) {
		return nil, fmt.Errorf("--until %s: a share must end in the future", s)
	}
	return timestamppb.New(t), nil
}

func newSessionShareCmd(g *globals) *cobra.Command {
	var with, until string
	var answer bool
	cmd := &cobra.Command{
		Use:   "share SESSION_ID --with USER [--answer] [--until 2h]",
		Short: "Share a session with a teammate on the same relay (read-only, or able to answer prompts)",
		Long: `Share one session with a teammate: the machine makes a one-time code (valid
10 minutes) that you send the teammate, who pairs with it (betcode pair CODE,
or the web app's pair screen) while logged in to the relay as USER. Their
device then sees that session only, end to end, and with --answer may
answer its permission prompts and questions; nothing else on the machine.
The share ends at --until (default 24 h) or at betcode session unshare,
which cuts the teammate at once.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if with == "" {
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: errors.New("name the teammate: --with USER (their user id on the relay)")}
			}
			exp, err := parseUntil(until, time.Now())
			if err != nil {
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
			}
			mode := pb.ShareMode_SHARE_MODE_READ
			if answer {
				mode = pb.ShareMode_SHARE_MODE_ANSWER
			}
			return shareCall(cmd, g, "share session", func(ctx context.Context, c pb.ShareServiceClient) error {
				resp, err := c.CreateShare(ctx, &pb.CreateShareRequest{SessionId: args[0], User: with, Mode: mode, ExpiresAt: exp})
				if err != nil {
					return err
				}
				printShareCode(cmd.OutOrStdout(), resp)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&with, "with", "", "the teammate's user id on the relay")
	cmd.Flags().BoolVar(&answer, "answer", false, "let the teammate answer permission prompts and questions (default: read-only)")
	cmd.Flags().StringVar(&until, "until", "", "when the share ends: a duration (2h) or an RFC 3339 time (default 24h)")
	return cmd
}

// printShareCode prints a new share and the code to send the teammate.
func printShareCode(w io.Writer, resp *pb.CreateShareResponse) {
	s := resp.Share
	fmt.Fprintf(w, "shared session %s with %s (%s) until %s: share %s\n", s.SessionId, s.User, modeName(s.Mode),
		s.ExpiresAt.AsTime().Local().Format(time.DateTime), s.Id)
	fmt.Fprintf(w, "send %s this code (works once, until %s); they run:\n\n  betcode pair %s\n\n", s.User,
		resp.CodeExpiresAt.AsTime().Local().Format(time.TimeOnly), resp.Code)
	fmt.Fprintf(w, "end it sooner with: betcode session unshare %s\n", s.Id)
}

func modeName(m pb.ShareMode) string {
	if m == pb.ShareMode_SHARE_MODE_ANSWER {
		return "can answer"
	}
	return "read-only"
}

func newSessionUnshareCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "unshare SHARE_ID",
		Short: "End a session share: the teammate's channels close at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return shareCall(cmd, g, "unshare", func(ctx context.Context, c pb.ShareServiceClient) error {
				resp, err := c.RevokeShare(ctx, &pb.RevokeShareRequest{ShareId: args[0]})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "share %s of session %s with %s ended; %d open channel(s) closed\n",
					resp.Share.Id, resp.Share.SessionId, resp.Share.User, resp.ChannelsClosed)
				return nil
			})
		},
	}
}

func newSessionSharesCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "shares [SESSION_ID]",
		Short: "List session shares (of one session, or all)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &pb.ListSharesRequest{}
			if len(args) == 1 {
				req.SessionId = args[0]
			}
			return shareCall(cmd, g, "list shares", func(ctx context.Context, c pb.ShareServiceClient) error {
				resp, err := c.ListShares(ctx, req)
				if err != nil {
					return err
				}
				printShares(cmd.OutOrStdout(), resp.Shares, time.Now())
				return nil
			})
		},
	}
}

// printShares prints shares as a table.
func printShares(out io.Writer, shares []*pb.Share, now time.Time) {
	if len(shares) == 0 {
		fmt.Fprintln(out, "no session shares")
		return
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SHARE\tSESSION\tWITH\tMODE\tSTATE\tUNTIL\tDEVICE")
	for _, s := range shares {
		state := "waiting for the code"
		switch {
		case s.RevokedAt != nil:
			state = "revoked"
		case !s.ExpiresAt.AsTime().After(now):
			state = "expired"
		case s.DeviceId != "":
			state = "active"
		}
		dev := "-"
		if s.DeviceName != "" {
			dev = s.DeviceName
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Id, s.SessionId, s.User, strings.ReplaceAll(modeName(s.Mode), " ", "-"),
			state, s.ExpiresAt.AsTime().Local().Format(time.DateTime), dev)
	}
	w.Flush()
}
