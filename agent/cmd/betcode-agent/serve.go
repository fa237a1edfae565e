package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/betcode-dev/betcode/agent/acp"
	"github.com/betcode-dev/betcode/agent/config"
	"github.com/betcode-dev/betcode/agent/daemon"
	"github.com/betcode-dev/betcode/agent/enroll"
	"github.com/betcode-dev/betcode/agent/gitlab"
	"github.com/betcode-dev/betcode/agent/permission"
	"github.com/betcode-dev/betcode/agent/voice"
	"github.com/betcode-dev/betcode/shared/telemetry"
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
or JSON). The command line wins over the environment, which wins over the
settings file ConfigService writes (<data-dir>/settings.json), which wins over
the --config file. Every key: docs/configuration.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindViper(cmd, v); err != nil {
				return err
			}
			settings, err := loadSettings(cmd, v)
			if err != nil {
				return err
			}
			log, err := telemetry.NewLogger(os.Stderr, v.GetString("log-format"), v.GetString("log-level"))
			if err != nil {
				return err
			}
			tracing, err := telemetry.Start(cmd.Context(), telemetry.Config{
				Endpoint: v.GetString("otlp-endpoint"), Insecure: v.GetBool("otlp-insecure"),
				ServiceName: "betcode-agent", ServiceVersion: version,
			})
			if err != nil {
				return err
			}
			defer func() {
				// The last turns' spans leave before the process does.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := tracing.Shutdown(ctx); err != nil {
					log.Warn("agent: flush traces", "err", err)
				}
			}()
			var ccgrid []daemon.CCGridRule
			if err := v.UnmarshalKey("permission_rules", &ccgrid); err != nil {
				return fmt.Errorf("permission_rules in the config file: %w", err)
			}
			link, err := relayLink(v, log)
			if err != nil {
				return err
			}
			var acpAgents []acp.Agent
			for _, a := range v.GetStringSlice("acp-agent") {
				agent, err := acp.ParseAgent(a)
				if err != nil {
					return err
				}
				acpAgents = append(acpAgents, agent)
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
				CodexBin:          v.GetString("codex-bin"),
				CodexBaseURL:      v.GetString("codex-base-url"),
				CodexModel:        v.GetString("codex-model"),
				CodexSandbox:      v.GetString("codex-sandbox"),
				OpenAIBaseURL:     v.GetString("openai-base-url"),
				OpenAIModel:       v.GetString("openai-model"),
				ACPAgents:         acpAgents,
				TLSCert:           v.GetString("tls-cert"),
				TLSKey:            v.GetString("tls-key"),
				TLSClientCA:       v.GetString("tls-client-ca"),
				Version:           version,
				Logger:            log,
				Tracing:           tracing,
				Relay:             link.Relay,
				RelayCA:           link.RelayCA,
				MachineCert:       link.MachineCert,
				MachineKey:        link.MachineKey,
				MachineName:       link.MachineName,
				CertRenewCheck:    v.GetDuration("cert-renew-check"),
				RelayE2E:          v.GetString("relay-e2e"),
				Settings:          settings,
				MetricsListen:     v.GetString("metrics-listen"),
				HTTPListen:        v.GetString("http-listen"),
				HTTPTLSCert:       v.GetString("http-tls-cert"),
				HTTPTLSKey:        v.GetString("http-tls-key"),
				HTTPInsecure:      v.GetBool("http-insecure"),
				WebOrigins:        v.GetStringSlice("web-origin"),
				DrainTimeout:      v.GetDuration("drain-timeout"),
				GitLab:            gitlab.Config{URL: v.GetString("gitlab-url"), Token: v.GetString("gitlab-token"), TokenFile: v.GetString("gitlab-token-file")},
				Voice: voice.Config{URL: v.GetString("voice-transcribe-url"), Model: v.GetString("voice-model"),
					APIKey: v.GetString("voice-api-key"), APIKeyFile: v.GetString("voice-api-key-file"), Timeout: v.GetDuration("voice-timeout")},
				SkipDrain: skipDrain(cmd.Context()),
			})
		},
	}
	// Every flag is a key of the settings table, which also renders
	// docs/configuration.md.
	config.RegisterFlags(cmd.Flags(), map[string]any{"data-dir": daemon.DefaultDataDir()})
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
