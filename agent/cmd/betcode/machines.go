package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func (g *globals) needRelay() error {
	_, ok, err := g.relay()
	if err != nil {
		return err
	}
	if !ok {
		return &client.ExitError{Code: client.ExitInvalidArgs, Err: errors.New("machines live on a relay: log in with betcode login --relay HOST:PORT, or pass --relay HOST:PORT (or set BETCODE_RELAY)")}
	}
	return nil
}

func newMachinesCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "machines",
		Short: "List your machines on the relay",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, loggedIn, err := g.relay()
			if err != nil {
				return err
			}
			if !loggedIn {
				if listed, err := listPaired(cmd, false); listed || err != nil {
					return err
				}
				return g.needRelay()
			}
			conn, err := g.dialRelay()
			if err != nil {
				return err
			}
			defer conn.Close()
			resp, err := pb.NewMachineServiceClient(conn).ListMachines(cmd.Context(), &pb.ListMachinesRequest{})
			if err != nil {
				return fmt.Errorf("list machines: %w", err)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tSTATUS\tLAST SEEN\tOS\tCPUS")
			for _, m := range resp.Machines {
				seen := "-"
				if m.LastSeen != nil {
					seen = m.LastSeen.AsTime().Local().Format(time.DateTime)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", m.Id, m.Name, m.Status, seen, m.GetResources().GetOs(), m.GetResources().GetCpuCores())
			}
			if err := w.Flush(); err != nil {
				return err
			}
			// The machines this device is paired with (end to end).
			_, err = listPaired(cmd, true)
			return err
		},
	}
}

func newMachineCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "machine", Short: "Manage which machine your commands go to"}
	cmd.AddCommand(&cobra.Command{
		Use:   "switch ID",
		Short: "Send your commands to machine ID from now on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			paired, err := switchPaired(cmd, args[0])
			if err != nil {
				return err
			}
			// A relay login also switches there (the web app follows it).
			if _, loggedIn, err := g.relay(); paired && (err != nil || !loggedIn) {
				return nil
			}
			if err := g.needRelay(); err != nil {
				return err
			}
			conn, err := g.dialRelay()
			if err != nil {
				return err
			}
			defer conn.Close()
			resp, err := pb.NewMachineServiceClient(conn).SwitchMachine(cmd.Context(), &pb.SwitchMachineRequest{MachineId: args[0]})
			if err != nil {
				return fmt.Errorf("switch machine: %w", err)
			}
			prev := resp.PreviousMachineId
			if prev == "" {
				prev = "none"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "now on %s (%s, %s); was %s\n", resp.Machine.Id, resp.Machine.Name, resp.Machine.Status, prev)
			return nil
		},
	})
	return cmd
}
