package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
	"github.com/betcode-dev/betcode/shared/mtls"
)

func newPairCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pair CODE",
		Short: "Pair this device with a machine (the code betcode-agent pair prints there)",
		Long: `Pair this device with a machine through its relay, with the one-time code
that 'betcode-agent pair' prints on the machine (valid 10 minutes, once).

Both sides prove the code's secret and pin each other's key: a relay that
substitutes a key makes pairing fail. From then on every command to that
machine runs end to end, inside a channel the relay cannot read, with a
relay credential scoped to that machine alone (no betcode login needed).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			code, err := e2ee.ParsePairingCode(args[0])
			if err != nil {
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
			}
			ca, err := pairRelayCA(g, code.Relay)
			if err != nil {
				return err
			}
			key, ps, err := client.LoadDevice()
			if err != nil {
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
			}
			name := g.v.GetString("name")
			if name == "" {
				name = deviceName()
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "pairing with machine %s through %s\n  machine key (from the code): %s\n", code.MachineID, code.Relay, code.Fingerprint)
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			token, err := pairToken(code)
			if err != nil {
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
			}
			if user, ok := code.ShareUser(); ok {
				fmt.Fprintf(out, "  this code shares a session with %s: pairing with your relay login\n", user)
			}
			p, err := client.Pair(ctx, code, ca, token, key, name)
			if err != nil {
				return &client.ExitError{Code: client.ExitPermission, Err: err}
			}
			ps.Put(p)
			path, err := client.PairingsPath()
			if err == nil {
				err = ps.Save(path)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "paired with %s (%s) as %q\n  machine key: %s\n  this device: %s\n", p.MachineName, p.MachineID, name,
				p.Fingerprint, e2ee.Fingerprint(key.Public))
			fmt.Fprintf(out, "commands now reach it end to end through the relay, e.g. betcode chat \"hello\"\n")
			return nil
		},
	}
	cmd.Flags().String("name", "", "this device's name on the machine (default: betcode CLI on HOSTNAME)")
	return cmd
}

// pairToken is the relay credential of a Pair call: the code's ticket, or
// for a session share's code the login (betcode login) of the user it
// shares with, on the same relay.
func pairToken(code e2ee.PairingCode) (string, error) {
	user, ok := code.ShareUser()
	if !ok {
		return code.Ticket, nil
	}
	need := fmt.Errorf("this code shares a session with user %s: log in to %s as %s first (betcode login), then pair", user, code.Relay, user)
	path, err := client.CredentialsPath()
	if err != nil {
		return "", need
	}
	c, err := client.LoadCredentials(path)
	if err != nil || c.Relay != code.Relay || c.Token == "" {
		return "", need
	}
	if c.User != "" && c.User != user {
		return "", fmt.Errorf("this code shares a session with user %s, and you are logged in to %s as %s: only %s can use it", user, code.Relay, c.User, user)
	}
	return c.Token, nil
}

// pairRelayCA is the relay's CA for pairing: --relay-ca, else the one
// stored by betcode login for the same relay, else the system roots.
func pairRelayCA(g *globals, relay string) (string, error) {
	if ca := g.v.GetString("relay-ca"); ca != "" {
		abs, err := filepath.Abs(ca)
		if err != nil {
			return "", err
		}
		return abs, nil
	}
	if path, err := client.CredentialsPath(); err == nil {
		if c, err := client.LoadCredentials(path); err == nil && c.Relay == relay {
			return c.RelayCA, nil
		}
	}
	if mtls.LoopbackAddr(relay) {
		return "", &client.ExitError{Code: client.ExitInvalidArgs,
			Err: errors.New("a relay on loopback has a development certificate: pass its CA with --relay-ca FILE")}
	}
	return "", nil
}

// listPaired prints this device's pairings (after a blank line when it
// follows another table); listed is false when it has none.
func listPaired(cmd *cobra.Command, after bool) (listed bool, err error) {
	path, err := client.PairingsPath()
	if err != nil {
		return false, err
	}
	ps, err := client.LoadPairings(path)
	if err != nil || len(ps.Machines) == 0 {
		return false, err
	}
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	if after {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "PAIRED MACHINE\tNAME\tRELAY\tPAIRED\tMACHINE KEY")
	for _, m := range ps.Machines {
		cur := ""
		if m.MachineID == ps.Current {
			cur = " (current)"
		}
		fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\t%s\n", m.MachineID, cur, m.MachineName, m.Relay,
			m.PairedAt.Local().Format(time.DateTime), shortFingerprint(m.Fingerprint))
	}
	return true, w.Flush()
}

// shortFingerprint is a fingerprint's first groups, for tables.
func shortFingerprint(fp string) string {
	f := strings.Fields(fp)
	if len(f) > 4 {
		return strings.Join(f[:4], " ") + " …"
	}
	return fp
}

// switchPaired makes a paired machine the current one; paired is false
// when machine is not paired with this device (the current paired machine
// is then forgotten, so that the relay's choice applies).
func switchPaired(cmd *cobra.Command, machine string) (paired bool, err error) {
	path, err := client.PairingsPath()
	if err != nil {
		return false, err
	}
	ps, err := client.LoadPairings(path)
	if err != nil {
		return false, err
	}
	p, ok := ps.Find(machine)
	if machine == "" {
		ok = false
	}
	switch {
	case ok:
		ps.Current = p.MachineID
	case ps.Current != "":
		ps.Current = ""
	default:
		return false, nil
	}
	if err := ps.Save(path); err != nil {
		return false, err
	}
	if ok {
		fmt.Fprintf(cmd.OutOrStdout(), "now on %s (%s), end to end\n", p.MachineID, p.MachineName)
	}
	return ok, nil
}

func newDevicesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "List, rename and revoke the devices paired with a machine",
		Long: `The devices paired with a machine (DeviceService), from the machine itself
or from any device paired with it: a revoked device's channels end at once
and it can open none again.`,
	}
	list := &cobra.Command{
		Use: "list", Short: "List the paired devices", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := g.dial()
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
		},
	}
	rename := &cobra.Command{
		Use: "rename ID NAME", Short: "Rename a paired device", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, err := g.dial()
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
		},
	}
	revoke := &cobra.Command{
		Use: "revoke ID", Short: "Revoke a paired device: its channels end at once", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, err := g.dial()
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
		},
	}
	cmd.AddCommand(list, rename, revoke)
	return cmd
}

func newForwardCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "forward --machine M [--listen 127.0.0.1:PORT]",
		Short: "Open a local port whose gRPC calls go end to end to a paired machine",
		Long: `Open a loopback port; every connection to it is an end-to-end channel to the
machine, so grpcurl and any standard gRPC tool keep working:

  betcode forward --machine m-1 --listen 127.0.0.1:7900 &
  grpcurl -plaintext 127.0.0.1:7900 list

Like ssh -L, anyone on this computer who can connect to the port acts as
this device: it listens on loopback only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ch, err := g.pairedTarget()
			if err != nil {
				return err
			}
			if ch == nil {
				return &client.ExitError{Code: client.ExitInvalidArgs,
					Err: errors.New("forward needs a machine paired with this device: betcode pair CODE, then --machine ID")}
			}
			addr := g.v.GetString("listen")
			if !mtls.LoopbackAddr(addr) {
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf("--listen %s: forward listens on loopback only", addr)}
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "forwarding %s to %s (%s) end to end; Ctrl-C stops\n", ln.Addr(), ch.Pairing.MachineID, ch.Pairing.MachineName)
			return forward(cmd.Context(), ln, *ch, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().String("listen", "127.0.0.1:7900", "loopback host:port to listen on")
	return cmd
}

// forward serves ln until ctx ends: each connection is spliced to a channel
// of its own.
func forward(ctx context.Context, ln net.Listener, ch client.Channel, logw io.Writer) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Go(func() {
			defer c.Close()
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			e, err := client.DialChannel(dctx, ch)
			cancel()
			if err != nil {
				fmt.Fprintf(logw, "forward: %v\n", err)
				return
			}
			defer e.Close()
			done := context.AfterFunc(ctx, func() { c.Close(); e.Close() })
			defer done()
			splice(c, e)
		})
	}
}

// splice copies both ways until either side ends.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(b, a)
		b.Close()
	})
	_, _ = io.Copy(a, b)
	a.Close()
	wg.Wait()
}
