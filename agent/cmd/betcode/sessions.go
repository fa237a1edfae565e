package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func newSessionsCmd(g *globals) *cobra.Command {
	var limit, offset uint32
	var cwd string
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List the agent's sessions, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			resp, err := pb.NewAgentServiceClient(conn).ListSessions(cmd.Context(), &pb.ListSessionsRequest{
				WorkingDirectory: cwd, Limit: limit, Offset: offset,
			})
			if err != nil {
				return fmt.Errorf("list sessions: %w", err)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSTATUS\tMSGS\tTOKENS IN/OUT\tCOST\tUPDATED\tDIRECTORY\tLAST MESSAGE")
			for _, s := range resp.Sessions {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d/%d\t$%.4f\t%s\t%s\t%s\n", s.Id, s.Status, s.MessageCount,
					s.TotalInputTokens, s.TotalOutputTokens, s.TotalCostUsd,
					s.UpdatedAt.AsTime().Local().Format(time.DateTime), s.WorkingDirectory, s.LastMessagePreview)
			}
			w.Flush()
			fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d sessions\n", len(resp.Sessions), resp.Total)
			return nil
		},
	}
	cmd.Flags().Uint32Var(&limit, "limit", 50, "at most this many sessions")
	cmd.Flags().Uint32Var(&offset, "offset", 0, "skip this many sessions")
	cmd.Flags().StringVar(&cwd, "cwd", "", "only sessions in this working directory")
	return cmd
}
