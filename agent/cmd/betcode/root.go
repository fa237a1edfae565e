package main

import (
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
	"golang.org/x/term"
	"google.golang.org/grpc"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/daemon"
)

var version = "0.1.0-dev"

type globals struct {
	v *viper.Viper
}

func newRootCmd() *cobra.Command {
	g := &globals{v: viper.New()}
	root := &cobra.Command{
		Use:           "betcode",
		Short:         "Drive Claude Code on your machines through betcode-agent",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			g.v.SetEnvPrefix("BETCODE")
			g.v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
			g.v.AutomaticEnv()
			return g.v.BindPFlags(cmd.Flags())
		},
	}
	pf := root.PersistentFlags()
	pf.String("agent", "unix://"+daemon.DefaultSocketPath(), "agent address: unix:///path or host:port (env BETCODE_AGENT)")
	pf.String("ca", "", "CA certificate to trust for a TLS agent address")
	pf.String("relay", "", "reach machines through this relay (host:port) instead of a local agent (env BETCODE_RELAY)")
	pf.String("relay-ca", "", "CA certificate of the relay (default: the system's roots)")
	pf.String("machine", "", "with --relay: the machine for this command (default: the one you switched to)")
	root.AddCommand(newChatCmd(g), newSessionsCmd(g), newReplayCmd(g), newMachinesCmd(g), newMachineCmd(g), newSendCmd(g))
	return root
}

func (g *globals) dial() (*grpc.ClientConn, error) {
	addr, o := g.v.GetString("agent"), client.DialOptions{CAFile: g.v.GetString("ca")}
	if relay := g.v.GetString("relay"); relay != "" {
		addr, o = relay, client.DialOptions{CAFile: g.v.GetString("relay-ca"), TLS: true, Machine: g.v.GetString("machine")}
	}
	conn, err := client.Dial(addr, o)
	if err != nil {
		return nil, &client.ExitError{Code: client.ExitConnection, Err: err}
	}
	return conn, nil
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
