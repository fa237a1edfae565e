package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mdp/qrterminal/v3"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/daemon"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// agentFlag adds --agent, the running daemon's local address.
func agentFlag(cmd *cobra.Command) *string {
	return cmd.Flags().String("agent", "unix://"+daemon.DefaultSocketPath(), "the running agent's Unix socket (unix:///path)")
}

// dialLocal connects to the running daemon on its Unix socket.
func dialLocal(addr string) (*grpc.ClientConn, error) {
	if !strings.HasPrefix(addr, "unix://") && !strings.HasPrefix(addr, "/") {
		return nil, fmt.Errorf("--agent %s: pairing is managed on the machine, through the agent's Unix socket", addr)
	}
	return client.Dial(addr, client.DialOptions{Version: version})
}

func newPairCmd() *cobra.Command {
	var noQR bool
	cmd := &cobra.Command{
		Use:   "pair",
		Short: "Print a one-time code (QR and text) that pairs a device with this machine",
		Long: `Print a one-time pairing code, as a QR code for the web app's camera and as text
for 'betcode pair TEXT', then wait until a device pairs with it (10 minutes).

The code holds the relay's address, this machine's id, its channel key's
fingerprint, a relay ticket for one pairing call, and a one-time secret the
relay never sees. Pairing proves that secret on both sides and pins both
keys, so a relay that substitutes a key makes it fail. Anyone who sees the
code in those 10 minutes can pair: show it only to the device you pair.

The agent must be running (betcode-agent serve) and enrolled with a relay.`,
		Args: cobra.NoArgs,
	}
	agent := agentFlag(cmd)
	cmd.Flags().BoolVar(&noQR, "no-qr", false, "print only the text form")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		conn, err := dialLocal(*agent)
		if err != nil {
			return err
		}
		defer conn.Close()
		stream, err := pb.NewDeviceServiceClient(conn).StartPairing(cmd.Context(), &pb.StartPairingRequest{})
		if err != nil {
			return fmt.Errorf("start pairing: %w", err)
		}
		out := cmd.OutOrStdout()
		for {
			m, err := stream.Recv()
			if err != nil {
				return fmt.Errorf("pairing: %w", err)
			}
			switch s := m.Step.(type) {
			case *pb.StartPairingResponse_Code:
				printCode(out, s.Code, noQR)
			case *pb.StartPairingResponse_Paired:
				d := s.Paired
				fmt.Fprintf(out, "\npaired: %s (device %s)\n  its key: %s\n", d.Name, d.Id, d.Fingerprint)
				return nil
			}
		}
	}
	return cmd
}

// printCode shows a pairing code as a QR code and as text.
func printCode(out io.Writer, c *pb.PairingCode, noQR bool) {
	if !noQR {
		qrterminal.GenerateWithConfig(c.Text, qrterminal.Config{
			Level: qrterminal.L, Writer: out, HalfBlocks: true,
			BlackChar: qrterminal.BLACK_BLACK, WhiteChar: qrterminal.WHITE_WHITE,
			BlackWhiteChar: qrterminal.BLACK_WHITE, WhiteBlackChar: qrterminal.WHITE_BLACK, QuietZone: 2,
		})
	}
	fmt.Fprintf(out, "Scan it with the web app, or on the device run:\n\n  betcode pair %s\n\n", c.Text)
	fmt.Fprintf(out, "This machine's key: %s\n", c.MachineFingerprint)
	fmt.Fprintf(out, "The code works once, until %s. Waiting for the device…\n", c.ExpiresAt.AsTime().Local().Format(time.TimeOnly))
}

func newDevicesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "List, rename and revoke the devices paired with this machine",
	}
	list := &cobra.Command{Use: "list", Short: "List the paired devices", Args: cobra.NoArgs}
	listAgent := agentFlag(list)
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		conn, err := dialLocal(*listAgent)
		if err != nil {
			return err
		}
		defer conn.Close()
		resp, err := pb.NewDeviceServiceClient(conn).ListDevices(cmd.Context(), &pb.ListDevicesRequest{})
		if err != nil {
			return fmt.Errorf("list devices: %w", err)
		}
		client.PrintDevices(cmd.OutOrStdout(), resp.Devices)
		return nil
	}
	rename := &cobra.Command{Use: "rename ID NAME", Short: "Rename a paired device", Args: cobra.ExactArgs(2)}
	renameAgent := agentFlag(rename)
	rename.RunE = func(cmd *cobra.Command, args []string) error {
		conn, err := dialLocal(*renameAgent)
		if err != nil {
			return err
		}
		defer conn.Close()
		resp, err := pb.NewDeviceServiceClient(conn).RenameDevice(cmd.Context(), &pb.RenameDeviceRequest{DeviceId: args[0], Name: args[1]})
		if err != nil {
			return fmt.Errorf("rename device: %w", err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "device %s is now %q\n", resp.Device.Id, resp.Device.Name)
		return nil
	}
	revoke := &cobra.Command{Use: "revoke ID", Short: "Revoke a paired device: its channels end at once", Args: cobra.ExactArgs(1)}
	revokeAgent := agentFlag(revoke)
	revoke.RunE = func(cmd *cobra.Command, args []string) error {
		conn, err := dialLocal(*revokeAgent)
		if err != nil {
			return err
		}
		defer conn.Close()
		resp, err := pb.NewDeviceServiceClient(conn).RevokeDevice(cmd.Context(), &pb.RevokeDeviceRequest{DeviceId: args[0]})
		if err != nil {
			return fmt.Errorf("revoke device: %w", err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "revoked %s (%s); %d open channel(s) ended\n", resp.Device.Id, resp.Device.Name, resp.ChannelsClosed)
		return nil
	}
	cmd.AddCommand(list, rename, revoke)
	return cmd
}
