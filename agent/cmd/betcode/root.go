package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
	"golang.org/x/term"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/daemon"
	"github.com/betcode-dev/betcode/agent/localtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/buildinfo"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/telemetry"
)

// version is set at build time with -ldflags "-X main.version=..."; see init.
var version string

// The version the build stamped, else the module version a go install
// recorded, else buildinfo.Dev.
func init() { version = buildinfo.Version(version) }

// envToken overrides the client token stored by `betcode login`.
const envToken = "BETCODE_TOKEN"

type globals struct {
	v *viper.Viper
	// dialled is the relay the command dialled, and tokenFrom where its
	// client token came from (empty: none was sent); hints use them.
	dialled, tokenFrom string
	// negotiation is the capability negotiation of the last dialled
	// connection, done before its first Converse.
	negotiation *client.Negotiation
	// tracing is the command's tracing (--otlp-endpoint), started before
	// it runs and flushed when it returns.
	tracing *telemetry.Tracing
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
			if err := g.v.BindPFlags(cmd.Flags()); err != nil {
				return err
			}
			return g.startTracing(cmd.Context())
		},
	}
	pf := root.PersistentFlags()
	pf.String("agent", "unix://"+daemon.DefaultSocketPath(), "agent address: unix:///path or host:port (env BETCODE_AGENT); wins over a relay you logged in to")
	pf.String("ca", "", "CA certificate to trust for a TLS agent address")
	pf.String("agent-token", "", "local token of a TCP agent (env BETCODE_AGENT_TOKEN; default: read from --agent-data-dir)")
	pf.String("agent-data-dir", daemon.DefaultDataDir(), "data directory of the TCP agent, whose local-token file betcode reads")
	pf.String("relay", "", "reach machines through this relay (host:port) instead of a local agent (env BETCODE_RELAY; default: the one you logged in to)")
	pf.String("relay-ca", "", "CA certificate of the relay (default: the one stored at login, else the system's roots)")
	pf.String("machine", "", "with --relay: the machine for this command (default: the one you switched to)")
	addTracingFlags(pf)
	root.AddCommand(newChatCmd(g), newSessionsCmd(g), newReplayCmd(g), newMachinesCmd(g), newMachineCmd(g), newSendCmd(g),
		newLoginCmd(g), newLogoutCmd(), newConfigCmd(g), newVersionCmd(g), newDaemonCmd(g), newGitLabCmd(g), newWorktreeCmd(g), newSessionCmd(g),
		newSubagentCmd(g), newOrchestrationCmd(g), newTeamCmd(g), newPairCmd(g), newDevicesCmd(g), newForwardCmd(g))
	withHints(root, g)
	withTracing(root, g)
	return root
}

// relayTarget is the relay a command goes through and how.
type relayTarget struct {
	addr, ca  string
	token     string
	tokenFrom string // BETCODE_TOKEN, or the credentials file
}

// relay returns the relay to use: --relay, else the one stored by `betcode
// login` unless --agent was given. The stored token (and CA) go only to the
// relay they were stored for; BETCODE_TOKEN goes to any.
func (g *globals) relay() (t relayTarget, ok bool, err error) {
	t.addr, t.ca = g.v.GetString("relay"), g.v.GetString("relay-ca")
	var stored *client.Credentials
	if t.addr != "" || !g.v.IsSet("agent") {
		path, err := client.CredentialsPath()
		if err == nil {
			stored, err = client.LoadCredentials(path)
		}
		if errors.Is(err, fs.ErrNotExist) {
			stored, err = nil, nil
		}
		if err != nil {
			return t, false, &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
		}
		if stored != nil && t.addr == "" {
			t.addr = stored.Relay
		}
		if stored != nil && stored.Relay == t.addr {
			if t.ca == "" {
				t.ca = stored.RelayCA
			}
			t.token, t.tokenFrom = stored.Token, "the token stored by betcode login"
		}
	}
	if t.addr == "" {
		return t, false, nil
	}
	if tok := os.Getenv(envToken); tok != "" {
		t.token, t.tokenFrom = tok, envToken
	}
	return t, true, nil
}

// dial connects to the machine a command is for: end to end through its
// relay when this device is paired with it (pairedTarget), else the local
// agent or the relay as before.
func (g *globals) dial() (*grpc.ClientConn, error) {
	ch, err := g.pairedTarget()
	if err != nil {
		return nil, err
	}
	if ch != nil {
		g.dialled = ch.Pairing.Relay
		return g.dialWith("", client.DialOptions{Channel: ch})
	}
	return g.dialRelay()
}

// pairedTarget returns the channel to the paired machine the command is
// for (--machine, else the current paired machine), or nil: --agent was
// given, or the machine is not paired with this device.
func (g *globals) pairedTarget() (*client.Channel, error) {
	if g.v.IsSet("agent") {
		return nil, nil
	}
	pp, err := client.PairingsPath()
	if err != nil {
		return nil, nil
	}
	ps, err := client.LoadPairings(pp)
	if err != nil {
		return nil, &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
	}
	p, ok := ps.Find(g.v.GetString("machine"))
	if !ok {
		return nil, nil
	}
	if relay := g.v.GetString("relay"); relay != "" && relay != p.Relay {
		return nil, nil
	}
	key, _, err := client.LoadDevice()
	if err != nil {
		return nil, &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
	}
	return &client.Channel{Pairing: p, Device: key, Name: deviceName()}, nil
}

// deviceName is the name this device gives itself when pairing.
func deviceName() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown host"
	}
	return "betcode CLI on " + host
}

// dialRelay connects to the local agent, or to the relay without a
// channel: the relay's own services (MachineService) and machines this
// device is not paired with.
func (g *globals) dialRelay() (*grpc.ClientConn, error) {
	addr, o := g.v.GetString("agent"), client.DialOptions{CAFile: g.v.GetString("ca")}
	r, viaRelay, err := g.relay()
	if err != nil {
		return nil, err
	}
	if viaRelay {
		addr, o = r.addr, client.DialOptions{CAFile: r.ca, TLS: true, Machine: g.v.GetString("machine"), Token: r.token}
		g.dialled, g.tokenFrom = r.addr, r.tokenFrom
	} else if isTCP(addr) {
		if o.AgentToken, err = g.agentToken(addr); err != nil {
			return nil, err
		}
	}
	return g.dialWith(addr, o)
}

// dialWith dials addr with o plus the command's version, tracing and
// capability negotiation.
func (g *globals) dialWith(addr string, o client.DialOptions) (*grpc.ClientConn, error) {
	o.Version = version
	o.Tracing = g.tracing
	g.negotiation = &client.Negotiation{Request: &pb.NegotiateRequest{ClientType: "cli", RequestedFeatures: cliFeatures}}
	o.Negotiation = g.negotiation
	conn, err := client.Dial(addr, o)
	if err != nil {
		return nil, &client.ExitError{Code: client.ExitConnection, Err: err}
	}
	return conn, nil
}

// agentToken is --agent-token, else, for an agent on this machine, the
// local token in --agent-data-dir, else none (the agent then says what it
// needs). This machine's token is never sent to another host.
func (g *globals) agentToken(addr string) (string, error) {
	if tok := g.v.GetString("agent-token"); tok != "" {
		return tok, nil
	}
	if !mtls.LoopbackAddr(addr) {
		return "", nil
	}
	tok, err := localtoken.Read(g.v.GetString("agent-data-dir"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
	}
	return tok, nil
}

// isTCP reports whether an --agent address is host:port rather than a
// Unix socket.
func isTCP(addr string) bool {
	return !strings.HasPrefix(addr, "unix://") && !strings.HasPrefix(addr, "/")
}

// withHints makes every command's UNAUTHENTICATED error from a relay say
// how to log in.
func withHints(root *cobra.Command, g *globals) {
	for _, c := range root.Commands() {
		withHints(c, g)
		if run := c.RunE; run != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error { return g.hint(run(cmd, args)) }
		}
	}
}

func (g *globals) hint(err error) error {
	if g.dialled == "" || status.Code(err) != codes.Unauthenticated {
		return err
	}
	var h string
	switch g.tokenFrom {
	case "":
		h = "this relay needs a client token: log in with betcode login --relay " + g.dialled
	case envToken:
		h = "the relay refused the token in " + envToken + ": set a valid one, or unset it and log in with betcode login --relay " + g.dialled
	default:
		h = "the relay refused " + g.tokenFrom + ": log in again with betcode login --relay " + g.dialled
	}
	return &client.ExitError{Code: client.ExitPermission, Err: fmt.Errorf("%w\nhint: %s", err, h)}
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
