package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/betcode-dev/betcode/relay/enrollsvc"
	"github.com/betcode-dev/betcode/relay/limits"
	"github.com/betcode-dev/betcode/relay/oidcsvc"
	"github.com/betcode-dev/betcode/relay/server"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/tunnelsvc"
	"github.com/betcode-dev/betcode/shared/telemetry"
	"github.com/betcode-dev/betcode/shared/webui"
)

func newServeCmd() *cobra.Command {
	v := viper.New()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the relay",
		Long: `Run the relay. Agents connect with a machine certificate signed by --client-ca
(enrolled with a join token when --ca-key is given); clients connect with TLS and
send a bearer token on every call (betcode login; accounts: betcode-relay admin).

Browsers reach the web app and its API (REST under /api, the WebSocket
/api/ws) on the same port: every request that is not gRPC goes there, over
HTTP/2 or HTTP/1.1. The web API authenticates, authorizes, limits and routes
each call exactly as a gRPC client's (the token is the same bearer token).
--http-listen moves it to a port of its own.

Every flag can also be set as BETCODE_RELAY_<FLAG> (dashes become
underscores) or as a key of the --config file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindViper(cmd, v); err != nil {
				return err
			}
			log, err := telemetry.NewLogger(os.Stderr, v.GetString("log-format"), v.GetString("log-level"))
			if err != nil {
				return err
			}
			tracing, err := telemetry.Start(cmd.Context(), telemetry.Config{
				Endpoint: v.GetString("otlp-endpoint"), Insecure: v.GetBool("otlp-insecure"),
				ServiceName: "betcode-relay", ServiceVersion: version,
			})
			if err != nil {
				return err
			}
			defer func() {
				// Spans of the last calls leave before the process does.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := tracing.Shutdown(ctx); err != nil {
					log.Warn("relay: flush traces", "err", err)
				}
			}()
			server.Version = version
			return server.Run(cmd.Context(), server.Config{
				Listen: v.GetString("listen"), TLSCert: v.GetString("tls-cert"), TLSKey: v.GetString("tls-key"),
				ClientCA: v.GetString("client-ca"), DataDir: v.GetString("data-dir"), DatabaseURL: v.GetString("database-url"),
				MetricsListen: v.GetString("metrics-listen"), AdvertiseAddr: v.GetString("advertise-addr"), HeartbeatInterval: v.GetDuration("heartbeat-interval"), MinAgentVersion: v.GetString("min-agent-version"),
				Calls: limits.Config{
					CallsPerSecond: v.GetFloat64("rate-limit"), Burst: v.GetInt("rate-burst"), MaxMessageBytes: v.GetInt("max-message-bytes"),
					MaxStreamsPerToken: v.GetInt("max-streams-per-token"), MaxStreamsPerTunnel: v.GetInt("max-streams-per-tunnel"),
					MaxPendingConns: v.GetInt("max-pending-conns"), HandshakeTimeout: v.GetDuration("handshake-timeout"),
				},
				CAKey: v.GetString("ca-key"), MachineCertLifetime: v.GetDuration("machine-cert-lifetime"), MaxMachinesPerOwner: v.GetInt("max-machines-per-owner"),
				OIDC: oidcsvc.Config{
					Issuer: v.GetString("oidc-issuer"), ClientID: v.GetString("oidc-client-id"), Scopes: v.GetStringSlice("oidc-scopes"),
					GroupsClaim: v.GetString("oidc-groups-claim"), TokenTTL: v.GetDuration("oidc-token-ttl"),
				},
				Web: server.WebConfig{
					Listen: v.GetString("http-listen"), Origins: v.GetStringSlice("web-origin"), Static: webui.FS,
				},
				PushSubject: v.GetString("push-subject"),
				Limits:      store.Limits{MaxMessages: v.GetInt("buffer-max-messages"), MaxBytes: v.GetInt64("buffer-max-bytes"), TTL: v.GetDuration("buffer-ttl")},
				Logger:      log,
				Tracing:     tracing,
				DrainGrace:  v.GetDuration("drain-grace"),
				Force:       forceStop,
				Front:       v.GetString("front"), PushPrivateEndpoints: v.GetBool("push-private-endpoints"),
				Bootstrap: bootstrap(v.GetBool("bootstrap-admin"), v.GetString("bootstrap-admin-name"), v.GetString("listen"), cmd.OutOrStdout(), log),
			})
		},
	}
	f := cmd.Flags()
	f.String("listen", ":8443", "address for agents and clients (TLS)")
	f.String("tls-cert", "", "the relay's TLS certificate")
	f.String("tls-key", "", "the key of --tls-cert")
	f.String("client-ca", "", "CA certificate that signs machine certificates")
	f.String("ca-key", "", "the key of --client-ca: lets the relay enroll machines with join tokens and renew their certificates (docs/auth.md)")
	f.Duration("machine-cert-lifetime", 0, "lifetime of the machine certificates the relay signs (default 720h; agents renew at two thirds)")
	f.Int("max-machines-per-owner", 0, fmt.Sprintf("machines (not revoked) one user, or one team, may enroll with join tokens (default %d; -1: no limit)", enrollsvc.DefaultMaxMachines))
	f.String("data-dir", "./relay-data", "directory for the SQLite store (used when --database-url is empty)")
	f.String("database-url", "", "PostgreSQL URL, e.g. postgres://user@host/db (recommended for production)")
	f.String("advertise-addr", "", "HOST:PORT other relay replicas reach this one at (same TLS port); set it on every replica to run several (needs --database-url); empty: one replica")
	f.String("metrics-listen", "", "address for Prometheus /metrics and /healthz (e.g. :9090); empty disables")
	f.Duration("heartbeat-interval", 0, "how often agents send heartbeats (default 30s)")
	f.String("min-agent-version", tunnelsvc.DefaultMinAgentVersion(), "the oldest betcode-agent that may register; older ones are refused with a message saying what to install (docs/upgrading.md); none: every version")
	f.Duration("drain-grace", server.DefaultDrainGrace, "on SIGTERM, how long the replica drains (streams resume elsewhere, agents reconnect to other replicas) before it ends what is left; a second SIGTERM ends it at once. Keep terminationGracePeriodSeconds above it")
	f.Int("buffer-max-messages", 0, "buffered requests per offline machine (default 1000)")
	f.Int64("buffer-max-bytes", 0, "buffered bytes per offline machine (default 16 MiB)")
	f.Duration("buffer-ttl", 0, "how long a buffered request waits (default 168h)")
	f.Float64("rate-limit", 0, fmt.Sprintf("calls per second one token may start (default %d; streams count once)", limits.DefaultCallsPerSecond))
	f.Int("rate-burst", 0, fmt.Sprintf("calls a quiet token may start at once (default %d)", limits.DefaultBurst))
	f.Int("max-message-bytes", 0, fmt.Sprintf("largest request message forwarded to a machine (default %d)", limits.DefaultMaxMessageBytes))
	f.Int("max-streams-per-token", 0, fmt.Sprintf("calls one token may have open at once (default %d)", limits.DefaultMaxStreamsPerToken))
	f.Int("max-streams-per-tunnel", 0, fmt.Sprintf("calls open at once to one machine (default %d)", limits.DefaultMaxStreamsPerTunnel))
	f.Int("max-pending-conns", 0, fmt.Sprintf("connections in their TLS handshake at once; a new one takes the oldest slot once it has waited a quarter of --handshake-timeout (default %d)", limits.DefaultMaxPendingConns))
	f.Duration("handshake-timeout", 0, "time a connection has to finish its TLS handshake, and a client connection to authenticate a call (default 10s)")
	f.String("oidc-issuer", "", "OpenID Connect issuer URL (https) users sign in with: betcode login --oidc (docs/auth.md); needs --oidc-client-id")
	f.String("oidc-client-id", "", "client id registered at the identity provider for BetCode: a public client allowed the device code grant")
	f.StringSlice("oidc-scopes", nil, "scopes to request (default openid,email,profile; openid and email are required)")
	f.String("oidc-groups-claim", "", "ID token claim listing the user's groups: a group named like a team makes the user a member of it (e.g. groups)")
	f.Duration("oidc-token-ttl", 0, "lifetime of the client tokens OIDC sign-in creates (default 720h)")
	f.String("http-listen", "", "separate HOST:PORT for the web app and its API (TLS with --tls-cert unless loopback, where it is plain HTTP); empty: served on --listen")
	f.StringSlice("web-origin", nil, "an extra origin (scheme://host[:port]) whose pages may open the web API's WebSocket, besides the relay's own; repeatable")
	f.String("push-subject", "", "VAPID contact for Web Push notifications to the web app (mailto:ops@example.com or an https URL; docs/push.md); empty: no push")
	f.Bool("push-private-endpoints", false, "let machines' own push messages go to http endpoints and private addresses (a private push service, tests; docs/push.md)")
	f.String("front", server.FrontEngine, "HTTP/2 server facing gRPC clients, which also carries calls on agents' direct connections: engine (the relay's own, docs/relay-h2-engine.md), or net/http (Go's, the one before; kept for one release to roll back to). Browsers are served by net/http either way")
	f.Bool("bootstrap-admin", true, "when the store has no user at all, create the first relay administrator (--bootstrap-admin-name) and print its client token to stdout, once (docs/auth.md); false: create users with betcode-relay admin")
	f.String("bootstrap-admin-name", "admin", "the user name of the first administrator --bootstrap-admin creates")
	f.String("config", "", "config file")
	f.String("log-level", "info", "debug, info, warn or error")
	f.String("log-format", "text", "log lines as text (logfmt) or json; lines of a traced call carry its trace_id")
	f.String("otlp-endpoint", "", "HOST:PORT of an OTLP/gRPC collector to export traces to (TLS unless loopback or --otlp-insecure); empty: no tracing (docs/observability.md)")
	f.Bool("otlp-insecure", false, "send traces to --otlp-endpoint without TLS off loopback")
	return cmd
}
