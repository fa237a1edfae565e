package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/betcode-dev/betcode/agent/daemon"
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
			return daemon.Run(cmd.Context(), daemon.Config{
				Listen:       v.GetStringSlice("listen"),
				DataDir:      v.GetString("data-dir"),
				ClaudeBin:    v.GetString("claude-bin"),
				DefaultModel: v.GetString("model"),
				TLSCert:      v.GetString("tls-cert"),
				TLSKey:       v.GetString("tls-key"),
				Version:      version,
				Logger:       log,
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
	f.String("config", "", "config file")
	f.String("log-level", "info", "log level: debug, info, warn, error")
	return cmd
}
