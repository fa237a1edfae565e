package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/betcode-dev/betcode/agent/daemon"
	"github.com/betcode-dev/betcode/agent/enroll"
)

// envJoinToken holds the join token when --token is not given. (Not
// BETCODE_TOKEN: that is the betcode client's token.)
const envJoinToken = "BETCODE_JOIN_TOKEN"

func newEnrollCmd() *cobra.Command {
	var relay, relayCA, token, name, dataDir string
	var force bool
	cmd := &cobra.Command{
		Use:   "enroll --relay HOST:PORT --relay-ca FILE --token JOIN_TOKEN",
		Short: "Enroll this machine with a relay using a join token",
		Long: `Enroll this machine with a relay: make an ECDSA P-256 key (it never leaves the
machine), send the relay a CSR with the single-use join token (bcj_…), and store
the key, the certificate the relay signs, its CA and the enrollment in
<data-dir>/relay/. Then ` + "`betcode-agent serve`" + ` connects to the relay with no
relay flags, and renews the certificate before it expires.

The token comes from --token, else BETCODE_JOIN_TOKEN; --token - reads it from
the first line of stdin.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if token == "-" {
				line, err := bufio.NewReader(io.LimitReader(cmd.InOrStdin(), 4096)).ReadString('\n')
				if err != nil && !errors.Is(err, io.EOF) {
					return fmt.Errorf("read the join token from stdin: %w", err)
				}
				token = line
			} else if token == "" {
				token = os.Getenv(envJoinToken)
			}
			e, err := enroll.Run(cmd.Context(), enroll.Config{
				Relay: relay, CAFile: relayCA, Token: strings.TrimSpace(token), Name: name, DataDir: dataDir, Force: force,
			})
			if err != nil {
				return err
			}
			owner := "team " + e.TeamID
			if e.TeamID == "" {
				owner = "owner " + e.Owner
			}
			start := "betcode-agent serve"
			if dataDir != daemon.DefaultDataDir() {
				start += " --data-dir " + dataDir
			}
			fmt.Fprintf(cmd.OutOrStdout(), "enrolled as machine %s (%s); start it with: %s\n", e.MachineID, owner, start)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&relay, "relay", os.Getenv("BETCODE_RELAY"), "the relay (host:port; env BETCODE_RELAY)")
	f.StringVar(&relayCA, "relay-ca", os.Getenv("BETCODE_RELAY_CA"), "CA certificate to verify the relay with (env BETCODE_RELAY_CA; default: the system's roots)")
	f.StringVar(&token, "token", "", "the join token, or - to read it from stdin (default: $"+envJoinToken+")")
	f.StringVar(&name, "name", "", "name of this machine on the relay (default: the hostname)")
	f.StringVar(&dataDir, "data-dir", envOr("BETCODE_DATA_DIR", daemon.DefaultDataDir()), "the agent's data directory (env BETCODE_DATA_DIR)")
	f.BoolVar(&force, "force", false, "replace an existing enrollment")
	return cmd
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
