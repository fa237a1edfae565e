package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/betcode-dev/betcode/agent/daemon"
	"github.com/betcode-dev/betcode/agent/enroll"
	"github.com/betcode-dev/betcode/agent/permission"
)

func newServeCmd() *cobra.Command {
	v := viper.New()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the agent daemon",
		Long: `Run the agent daemon. It listens on a Unix socket by default
(` + daemon.DefaultSocketPath() + `, mode 0600) and, when asked, on TCP.

Every flag can also be set as BETCODE_<FLAG> in the environment (dashes become
underscores, e.g. BETCODE_DATA_DIR) or as a key in the --config file (YAML, TOML
or JSON). The command line wins over the environment, which wins over the file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindViper(cmd, v); err != nil {
				return err
			}
			log, err := newLogger(v.GetString("log-level"))
			if err != nil {
				return err
			}
			var ccgrid []daemon.CCGridRule
			if err := v.UnmarshalKey("permission_rules", &ccgrid); err != nil {
				return fmt.Errorf("permission_rules in the config file: %w", err)
			}
			link, err := relayLink(v, log)
			if err != nil {
				return err
			}
			return daemon.Run(cmd.Context(), daemon.Config{
				Permissions: permission.Settings{
					Allow: v.GetStringSlice("allow"), Deny: v.GetStringSlice("deny"), Ask: v.GetStringSlice("ask"),
				},
				PermissionRules:   ccgrid,
				PermissionTimeout: v.GetDuration("permission-timeout"),
				MaxProcesses:      v.GetInt("max-processes"),
				HangTimeout:       v.GetDuration("hang-timeout"),
				AutoCompactTokens: v.GetUint64("auto-compact-tokens"),
				Listen:            v.GetStringSlice("listen"),
				DataDir:           v.GetString("data-dir"),
				ClaudeBin:         v.GetString("claude-bin"),
				DefaultModel:      v.GetString("model"),
				TLSCert:           v.GetString("tls-cert"),
				TLSKey:            v.GetString("tls-key"),
				TLSClientCA:       v.GetString("tls-client-ca"),
				Version:           version,
				Logger:            log,
				Relay:             link.Relay,
				RelayCA:           link.RelayCA,
				MachineCert:       link.MachineCert,
				MachineKey:        link.MachineKey,
				MachineName:       link.MachineName,
				CertRenewCheck:    v.GetDuration("cert-renew-check"),
			})
		},
	}
	f := cmd.Flags()
	f.StringSlice("listen", nil, "address to serve: unix:///path or host:port (repeatable; default unix://"+daemon.DefaultSocketPath()+")")
	f.String("data-dir", daemon.DefaultDataDir(), "directory for the event log and state")
	f.String("claude-bin", "claude", "the Claude Code CLI binary (name on PATH or path)")
	f.String("model", "", "default model for new sessions (Claude Code's default when empty)")
	f.String("tls-cert", "", "TLS certificate for TCP listeners (required off loopback)")
	f.String("tls-key", "", "TLS key for --tls-cert")
	f.String("tls-client-ca", "", "with --tls-cert: accept client certificates of this CA instead of the local token")
	f.String("relay", "", "relay to dial out to (host:port); clients then reach this machine through it (default: the one `betcode-agent enroll` stored)")
	f.String("relay-ca", "", "CA certificate of the relay")
	f.String("machine-cert", "", "this machine's client certificate (from `betcode-relay certs machine`; enrolled machines need none)")
	f.String("machine-key", "", "the key of --machine-cert")
	f.String("machine-name", "", "name shown in `betcode machines` (default: the hostname)")
	f.Duration("cert-renew-check", 0, "how often to check whether the machine certificate needs renewing (default 1h; it is renewed with a third of its lifetime left)")
	f.StringSlice("allow", nil, "permission rule to allow without asking, Claude Code syntax, e.g. 'Bash(go test *)' (repeatable)")
	f.StringSlice("deny", nil, "permission rule to deny without asking, e.g. 'Bash(rm *)' (repeatable; deny wins)")
	f.StringSlice("ask", nil, "permission rule that always asks (repeatable)")
	f.Duration("permission-timeout", 5*time.Minute, "deny a permission request nobody answered within this time")
	f.Int("max-processes", 8, "Claude processes running at once; idle ones are stopped to make room")
	f.Duration("hang-timeout", 10*time.Minute, "stop a Claude process that prints nothing this long mid-turn")
	f.Uint64("auto-compact-tokens", 0, "compact a session after a turn whose context exceeds this many tokens (0: never)")
	f.String("config", "", "config file")
	f.String("log-level", "info", "log level: debug, info, warn, error")
	return cmd
}

// linkConfig is the relay part of the daemon's configuration.
type linkConfig struct {
	Relay, RelayCA, MachineCert, MachineKey, MachineName string
}

// relayLink returns the relay flags, or, when none is given, the
// enrollment `betcode-agent enroll` left in the data directory (if any).
func relayLink(v *viper.Viper, log *slog.Logger) (linkConfig, error) {
	c := linkConfig{
		Relay: v.GetString("relay"), RelayCA: v.GetString("relay-ca"),
		MachineCert: v.GetString("machine-cert"), MachineKey: v.GetString("machine-key"),
		MachineName: v.GetString("machine-name"),
	}
	if c.Relay != "" || c.RelayCA != "" || c.MachineCert != "" || c.MachineKey != "" {
		return c, nil
	}
	e, files, err := enroll.Load(v.GetString("data-dir"))
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	c.Relay, c.RelayCA, c.MachineCert, c.MachineKey = e.Relay, files.CA, files.Cert, files.Key
	if c.MachineName == "" {
		c.MachineName = e.Name
	}
	log.Info("relay link: using the enrollment", "file", files.Info, "relay", e.Relay, "machine_id", e.MachineID)
	return c, nil
}
