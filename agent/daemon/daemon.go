// Package daemon wires the agent together: it checks the Claude binary,
// opens the session manager, listens on the configured addresses and serves
// the gRPC services until its context ends, then shuts down in order (stop
// accepting, stop the CLIs, flush the log, end the streams).
package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/betcode-dev/betcode/agent/acp"
	"github.com/betcode-dev/betcode/agent/channelsvc"
	"github.com/betcode-dev/betcode/agent/claude"
	"github.com/betcode-dev/betcode/agent/codex"
	"github.com/betcode-dev/betcode/agent/config"
	"github.com/betcode-dev/betcode/agent/configsvc"
	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/gitlab"
	"github.com/betcode-dev/betcode/agent/localtoken"
	"github.com/betcode-dev/betcode/agent/openaiapi"
	"github.com/betcode-dev/betcode/agent/pairing"
	"github.com/betcode-dev/betcode/agent/permission"
	"github.com/betcode-dev/betcode/agent/provider"
	"github.com/betcode-dev/betcode/agent/push"
	"github.com/betcode-dev/betcode/agent/relaylink"
	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/session"
	"github.com/betcode-dev/betcode/agent/sessionsvc"
	"github.com/betcode-dev/betcode/agent/share"
	"github.com/betcode-dev/betcode/agent/subagent"
	"github.com/betcode-dev/betcode/agent/team"
	"github.com/betcode-dev/betcode/agent/voice"
	"github.com/betcode-dev/betcode/agent/workspace"
	"github.com/betcode-dev/betcode/agent/worktree"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/buildinfo"
	"github.com/betcode-dev/betcode/shared/claudecli/versions"
	"github.com/betcode-dev/betcode/shared/healthdetail"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/telemetry"
)

// Config is the daemon's configuration.
type Config struct {
	Listen          []string // "unix:///path" or "host:port"; default: DefaultSocketPath
	DataDir         string   // event log and state; default: DefaultDataDir
	ClaudeBin       string   // default: "claude" on PATH
	ClaudeEnv       []string // extra environment for the CLI
	DefaultModel    string
	TLSCert, TLSKey string // required to listen on TCP off loopback
	// TLSClientCA, if set, makes TLS listeners verify client certificates
	// of this CA when given; a call with a verified one needs no local
	// token.
	TLSClientCA     string
	Version         string
	ShutdownTimeout time.Duration // default 10s

	// Codex runs sessions with provider codex (docs/codex.md): CodexBin ""
	// finds the pinned install; CodexBaseURL "" leaves Codex unconfigured.
	CodexBin, CodexBaseURL, CodexModel, CodexSandbox string
	// OpenAIBaseURL and OpenAIModel configure provider openai-api
	// (docs/providers.md); an empty base URL leaves it unconfigured. The key
	// comes from OPENAI_API_KEY.
	OpenAIBaseURL, OpenAIModel string
	// ACPAgents are the agents provider acp can run.
	ACPAgents []acp.Agent

	// DrainTimeout is how long running turns may go on once ctx ends, while
	// new turns are refused; 0 does not wait (the serve flag defaults to
	// 30s). Closing SkipDrain (a second SIGTERM) ends the wait early.
	DrainTimeout time.Duration
	SkipDrain    <-chan struct{}
	// Relay, when set, makes the agent dial out to a relay (host:port) with
	// the machine certificate, so clients can reach it from anywhere.
	Relay                            string
	RelayCA, MachineCert, MachineKey string
	MachineName                      string
	// RelayE2E is "required" to serve relayed calls only inside end-to-end
	// channels from paired devices; "optional" (or "") serves them in clear
	// too.
	RelayE2E string
	// CertRenewCheck is how often the machine certificate's remaining
	// lifetime is checked while the tunnel is up (default 1h); it is
	// renewed with a third of its lifetime left.
	CertRenewCheck time.Duration
	Logger         *slog.Logger
	// Tracing, if set, traces calls and CLI turns (docs/observability.md).
	Tracing *telemetry.Tracing

	// Permission rules: Claude Code syntax (e.g. "Bash(git *)") and
	// ccgrid-style rules. Deny wins over allow, allow over ask.
	Permissions       permission.Settings
	PermissionRules   []CCGridRule
	PermissionTimeout time.Duration
	MaxProcesses      int
	HangTimeout       time.Duration
	AutoCompactTokens uint64
	// HTTPListen, if set, is a host:port serving the web app and its API
	// (web.go); off loopback it needs HTTPTLSCert/HTTPTLSKey or
	// HTTPInsecure. WebOrigins are other origins whose pages may open its
	// WebSocket.
	HTTPListen, HTTPTLSCert, HTTPTLSKey string
	HTTPInsecure                        bool
	WebOrigins                          []string
	// MetricsListen, if set, is a host:port serving Prometheus /metrics;
	// empty disables it.
	MetricsListen string
	// Ready, if set, is called with the bound addresses once serving.
	Ready func(addrs []net.Addr)
	// GitLab is the GitLab instance and token of GitLabService.
	GitLab gitlab.Config
	// Voice is the transcription endpoint of VoiceService (dictation from
	// paired devices); its zero value leaves voice unconfigured.
	Voice voice.Config
	// Settings, if set, are the settings with their sources, for
	// ConfigService (cmd/betcode-agent fills them); nil: the fields above.
	Settings *config.Snapshot
}

// CCGridRule is a permission rule in ccgrid's shape.
type CCGridRule struct {
	ID          string `mapstructure:"id"`
	ToolName    string `mapstructure:"toolName"`
	PathPattern string `mapstructure:"pathPattern"`
	Behavior    string `mapstructure:"behavior"`
}

// permissionEngine compiles the configured rules; a bad rule stops the agent
// with a message naming it.
func permissionEngine(cfg Config) (*permission.Engine, error) {
	rules, err := cfg.Permissions.Rules()
	if err != nil {
		return nil, fmt.Errorf("permission rules: %w", err)
	}
	for i, r := range cfg.PermissionRules {
		id := r.ID
		if id == "" {
			id = fmt.Sprintf("rule-%d", i+1)
		}
		rule, err := permission.CCGridRule(id, r.ToolName, r.PathPattern, r.Behavior)
		if err != nil {
			return nil, fmt.Errorf("permission_rules[%d]: %w", i, err)
		}
		rules = append(rules, rule)
	}
	home, _ := os.UserHomeDir()
	return permission.New(rules, permission.Options{Home: home})
}

// DefaultSocketPath is $XDG_RUNTIME_DIR/betcode/agent.sock, or
// /tmp/betcode-<uid>/agent.sock when XDG_RUNTIME_DIR is unset.
func DefaultSocketPath() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "betcode", "agent.sock")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("betcode-%d", os.Getuid()), "agent.sock")
}

// DefaultDataDir is $XDG_DATA_HOME/betcode, or ~/.local/share/betcode.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "betcode")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "betcode-data")
	}
	return filepath.Join(home, ".local", "share", "betcode")
}

func (c *Config) setDefaults() {
	if len(c.Listen) == 0 {
		c.Listen = []string{"unix://" + DefaultSocketPath()}
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir()
	}
	if c.ClaudeBin == "" {
		c.ClaudeBin = "claude"
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Version == "" {
		c.Version = buildinfo.Dev
	}
}

// Run serves until ctx ends, then shuts down gracefully.
func Run(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	log := cfg.Logger
	bin, err := claude.Resolve(cfg.ClaudeBin)
	if err != nil {
		return err
	}
	claudeVersion, err := claude.Version(ctx, bin)
	if err != nil {
		return err
	}
	if w := versions.Warning(claudeVersion); w != "" {
		log.Warn(w, "claude", bin, "claude_version", claudeVersion)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir %q (set --data-dir): %w", cfg.DataDir, err)
	}
	// TCP listeners admit only calls carrying this token (Unix sockets and
	// the relay tunnel need none): see package localtoken.
	localToken, err := localtoken.LoadOrCreate(cfg.DataDir)
	if err != nil {
		return err
	}
	guard := localtoken.NewGuard(localToken, localtoken.Path(cfg.DataDir))
	eng, err := permissionEngine(cfg)
	if err != nil {
		return err
	}
	reg := newRegistry()
	mgr, err := session.Open(ctx, session.Config{
		Metrics: session.NewMetrics(reg), LogMetrics: eventlog.NewMetrics(reg),
		Tracer:    cfg.Tracing.Tracer("github.com/betcode-dev/betcode/agent/session"),
		ClaudeBin: bin, ClaudeEnv: cfg.ClaudeEnv, DefaultModel: cfg.DefaultModel, Logger: log,
		Providers: provider.NewRegistry(&claude.Provider{Bin: bin}, &codex.Provider{
			Binary: cfg.CodexBin, Home: filepath.Join(cfg.DataDir, "codex"), BaseURL: cfg.CodexBaseURL,
			APIKey: os.Getenv("OPENAI_API_KEY"), Model: cfg.CodexModel, Sandbox: cfg.CodexSandbox,
		}, &openaiapi.Provider{
			BaseURL: cfg.OpenAIBaseURL, APIKey: os.Getenv("OPENAI_API_KEY"), Model: cfg.OpenAIModel,
			Home: filepath.Join(cfg.DataDir, "openai-api"),
		}, &acp.Provider{Agents: cfg.ACPAgents}),
		Permissions: eng, PermissionTimeout: cfg.PermissionTimeout, MaxProcesses: cfg.MaxProcesses,
		HangTimeout: cfg.HangTimeout, AutoCompactTokens: cfg.AutoCompactTokens,
		// TodoWrite (not the Task* tools) so that todos arrive as whole lists.
		ClaudeEnvDefaults: []string{"CLAUDE_CODE_ENABLE_TODO_TOOLS=1", "CLAUDE_CODE_ENABLE_TASKS=0"},
	}, filepath.Join(cfg.DataDir, "agent.db"))
	if err != nil {
		return err
	}
	gitlabSvc, err := gitlab.New(gitlab.Options{Config: cfg.GitLab, SessionDir: gitlab.SessionDirs(mgr.Get), Logger: log,
		TracerProvider: cfg.Tracing.TracerProvider()})
	if err != nil {
		mgr.Close(context.Background())
		return err
	}
	transcriber, err := voice.New(cfg.Voice, nil, log)
	if err != nil {
		mgr.Close(context.Background())
		return fmt.Errorf("voice: %w", err)
	}
	var lns []net.Listener
	closeAll := func() {
		for _, l := range lns {
			l.Close()
		}
	}
	for _, addr := range cfg.Listen {
		l, err := listen(addr, cfg)
		if err != nil {
			closeAll()
			mgr.Close(context.Background())
			return err
		}
		lns = append(lns, l)
	}

	// Feature flags: the defaults, with --feature-flag turning more on.
	flags, err := server.Enable(server.DefaultFlags, featureFlags(cfg))
	if err != nil {
		closeAll()
		mgr.Close(context.Background())
		return err
	}
	// VersionService, and the check that refuses clients older than the
	// minimum (on every call, through the relay too).
	ver := &server.Version{ServerVersion: cfg.Version, ClaudeVersion: claudeVersion, Log: log, Flags: flags,
		ClaudeRange: server.ClaudeRange{Min: versions.TestedMin, Max: versions.TestedMax}}
	// Which paired device answered which prompt (agent/push): its own
	// notification is not withdrawn by a "resolved" push.
	answers := push.NewAnswers()
	// A teammate's device, inside its channel, may make only the calls of
	// the session share it paired for (agent/share); the stores are set
	// below, before the server serves.
	shareGate := &share.Gate{}
	// Tracing first: its spans (or the caller's trace context) cover the
	// interceptors below.
	srv := grpc.NewServer(append(cfg.Tracing.ServerOptions(),
		// Static windows: grpc-go's BDP estimation would ping on every
		// small call, an extra round of frames through the relay tunnel.
		grpc.InitialWindowSize(1<<20), grpc.InitialConnWindowSize(4<<20),
		// The relay checks an idle direct connection with a ping every
		// 30 s (shared/tunnel, direct.go); grpc-go's default policy would
		// answer that with GOAWAY after two.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(guard.UnaryInterceptor, shareGate.UnaryInterceptor, server.UnaryRecover(log), ver.UnaryInterceptor, answers.UnaryInterceptor),
		grpc.ChainStreamInterceptor(guard.StreamInterceptor, shareGate.StreamInterceptor, server.StreamRecover(log), ver.StreamInterceptor, answers.StreamInterceptor),
	)...)
	agentSvc := &server.Agent{Sessions: mgr, Log: log}
	pb.RegisterAgentServiceServer(srv, agentSvc)
	// SessionService: managed sessions over the same manager (ends when
	// the manager closes).
	sessions, err := sessionsvc.New(ctx, mgr, sessionsvc.Options{Logger: log})
	if err != nil {
		closeAll()
		mgr.Close(context.Background())
		return err
	}
	defer sessions.Close()
	pb.RegisterSessionServiceServer(srv, sessions)
	// Teammate and skill specs (TeamService); SubagentSpec.teammate_spec_id
	// names one.
	teamSpecs, err := team.OpenStore(filepath.Join(cfg.DataDir, team.FileName), team.StoreOptions{})
	if err != nil {
		closeAll()
		mgr.Close(context.Background())
		return err
	}
	// WorktreeService (feature flag worktree_management); sessions start in
	// a worktree by id through the manager, subagents in worktrees of their
	// own (create_worktree).
	home, _ := os.UserHomeDir()
	worktrees := worktree.New(worktree.Options{Store: mgr.Log(), Sessions: worktree.ManagerSessions{M: mgr}, Home: home, Logger: log})
	mgr.SetWorktrees(worktrees)
	// SubagentService (ALPHA): subagents are sessions of the same manager;
	// with the flag off every call is refused with UNIMPLEMENTED.
	var subagentSvc pb.SubagentServiceServer = subagent.Disabled{}
	if server.IsEnabled(flags, server.SubagentOrchestration) {
		maxCost, err := config.ParseCost(setting[string](cfg, "subagent-max-cost-usd"))
		if err != nil {
			closeAll()
			mgr.Close(context.Background())
			return fmt.Errorf("subagent-max-cost-usd: %w", err)
		}
		subagents := subagent.New(mgr, subagent.Options{Logger: log, MaxCostUSD: maxCost, Specs: teamSpecs,
			MaxParallel: setting[int](cfg, "subagent-max-parallel"), Worktrees: worktrees})
		defer subagents.Close()
		subagentSvc = subagents
	}
	pb.RegisterSubagentServiceServer(srv, subagentSvc)
	// TeamService (always on): the ccgrid view of the same sessions and
	// subagents; with the flag off a session has no subagent teammates.
	teamSvc, err := team.New(team.Options{Logger: log, Sessions: team.ManagerSessions{M: mgr}, Subagents: subagentSvc, Store: teamSpecs})
	if err != nil {
		closeAll()
		mgr.Close(context.Background())
		return err
	}
	pb.RegisterTeamServiceServer(srv, teamSvc)
	pb.RegisterVersionServiceServer(srv, ver)
	pb.RegisterConfigServiceServer(srv, configsvc.New(settingsSnapshot(cfg), configsvc.Options{
		Home: home, Logger: log, Grants: mgr.Grants,
		Apply: func(values map[string]any, changed []string) error { return applySettings(mgr, cfg, values, changed) },
	}))
	pb.RegisterGitLabServiceServer(srv, gitlabSvc)
	// VoiceService: never served to the relay in clear (localtoken.Guard).
	pb.RegisterVoiceServiceServer(srv, voice.NewService(transcriber))
	pb.RegisterWorkspaceServiceServer(srv, workspace.New(workspace.Options{Sessions: workspace.SessionDirs(mgr.Get), Home: home, Logger: log}))
	pb.RegisterWorktreeServiceServer(srv, worktrees)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(pb.AgentService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	reflection.Register(srv)
	started := time.Now()
	details := &healthdetail.Server{
		Checks: []healthdetail.Check{
			{Name: "sqlite", Critical: true, Run: func(ctx context.Context) (bool, string) {
				if _, err := mgr.Log().LastSeq(ctx, "health-check"); err != nil {
					return false, "event log query failed: " + err.Error()
				}
				return true, "ok"
			}},
			{Name: "local_server", Critical: true, Run: func(context.Context) (bool, string) {
				if mgr.Draining() {
					return false, "shutting down: finishing running turns, refusing new ones"
				}
				return true, "accepting connections"
			}},
			{Name: "subprocess_pool", Run: func(context.Context) (bool, string) {
				n, max := mgr.RunningProcesses(), mgr.MaxProcesses()
				return n < max, fmt.Sprintf("%d/%d slots used", n, max)
			}},
		},
		Metadata: func() map[string]string {
			return map[string]string{"version": cfg.Version, "claude_version": claudeVersion, "uptime": time.Since(started).Round(time.Second).String()}
		},
	}
	pb.RegisterBetCodeHealthServer(srv, details)

	// End-to-end channels from paired devices (ChannelService) and the
	// devices themselves (DeviceService); relayed calls outside a channel
	// are served only with --relay-e2e=optional (localtoken.Guard).
	devices, err := pairing.Open(cfg.DataDir)
	if err != nil {
		closeAll()
		mgr.Close(context.Background())
		return err
	}
	defer func() {
		if err := devices.Flush(); err != nil {
			log.Warn("save paired devices' last use", "err", err)
		}
	}()
	guard.RequireChannel(cfg.RelayE2E == "required")
	channels := channelsvc.NewListener()
	seen, err := pairing.OpenSeen(cfg.DataDir)
	if err != nil {
		closeAll()
		mgr.Close(context.Background())
		return err
	}
	door := &channelsvc.Service{Store: devices, MachineName: cfg.MachineName, Listener: channels, Log: log, Version: cfg.Version,
		Sessions: answeringSessions{Sessions: agentSvc, answers: answers}, Seen: seen}
	pb.RegisterChannelServiceServer(srv, door)
	pb.RegisterDeviceServiceServer(srv, door)
	// Sessions shared with teammates (ShareService), enforced by shareGate.
	grants, err := share.Open(cfg.DataDir)
	if err != nil {
		closeAll()
		mgr.Close(context.Background())
		return err
	}
	shareGate.Devices, shareGate.Grants = devices, grants
	shares := &share.Service{Grants: grants, Devices: devices, Log: log,
		SessionExists: func(ctx context.Context, id string) error { _, err := mgr.Get(ctx, id); return err }}
	pb.RegisterShareServiceServer(srv, shares)

	var link *relaylink.Link
	if cfg.Relay != "" {
		if door.MachineID, err = machineIDOf(cfg.MachineCert); err != nil {
			closeAll()
			mgr.Close(context.Background())
			return err
		}
		link, err = relaylink.New(relaylink.Config{
			Relay: cfg.Relay, CAFile: cfg.RelayCA, CertFile: cfg.MachineCert, KeyFile: cfg.MachineKey,
			MachineName: cfg.MachineName, Version: cfg.Version, Logger: log, RenewEvery: cfg.CertRenewCheck,
			// Calls through the tunnel were authenticated by the relay.
			Handler: localtoken.TunnelHandler(srv), Native: srv,
		})
		if err != nil {
			closeAll()
			mgr.Close(context.Background())
			return err
		}
		door.Relay = link
		shares.Relay, shares.MachineID = link, door.MachineID
		details.Checks = append(details.Checks, healthdetail.Check{Name: "tunnel", Run: func(context.Context) (bool, string) {
			up, since := link.Connected()
			if up {
				return true, "connected to " + cfg.Relay
			}
			down := time.Since(since)
			return down < time.Minute, fmt.Sprintf("relay tunnel not connected for %s; retrying", down.Round(time.Second))
		}})
	}
	// Push notifications the machine writes and encrypts itself for its
	// paired devices' browsers, delivered through the relay (agent/push).
	pushSubs, err := push.OpenStore(cfg.DataDir)
	if err != nil {
		closeAll()
		mgr.Close(context.Background())
		return err
	}
	// A paired browser registers its subscriptions inside its channel.
	door.PushHandler = push.NewHandler(pushSubs, func(r *http.Request) (string, bool) {
		d, ok := channelsvc.DeviceFromContext(r.Context())
		return d.ID, ok
	}, log)
	var notifier *push.Notifier
	if link != nil {
		notifier, err = push.New(push.Options{MachineID: door.MachineID, Store: pushSubs, Devices: devices, Sender: link, Log: log,
			Answers: answers, Registerer: reg, OpenFile: filepath.Join(cfg.DataDir, push.OpenFile),
			Watch: func(ctx context.Context, send func(*pb.SessionUpdate) error) error {
				return mgr.Watch(ctx, session.WatchOptions{}, send)
			}})
		if err != nil {
			closeAll()
			mgr.Close(context.Background())
			return err
		}
	}
	reg.MustRegister(mgr.Collector())
	registerTunnel(reg, link)
	web, err := startWeb(cfg, srv, reg, log)
	if err != nil {
		closeAll()
		mgr.Close(context.Background())
		return err
	}
	var metrics *metricsServer
	if cfg.MetricsListen != "" {
		if metrics, err = serveMetrics(cfg.MetricsListen, reg, log); err != nil {
			web.close(0)
			closeAll()
			mgr.Close(context.Background())
			return err
		}
		defer metrics.close()
	}
	linkCtx, stopLink := context.WithCancel(ctx)
	linkDone := make(chan struct{})
	go func() {
		defer close(linkDone)
		if link != nil {
			_ = link.Run(linkCtx)
		}
	}()
	shareDone := make(chan struct{})
	go func() {
		defer close(shareDone)
		_ = shares.Run(linkCtx)
	}()
	notifyDone := make(chan struct{})
	go func() {
		defer close(notifyDone)
		if notifier != nil {
			_ = notifier.Run(linkCtx)
		}
	}()

	// Channels' connections end when srv stops (it closes the listener).
	go func() { _ = srv.Serve(channels) }()
	serveErr := make(chan error, len(lns))
	addrs := make([]net.Addr, 0, len(lns))
	tcp := false
	for _, l := range lns {
		addrs = append(addrs, l.Addr())
		tcp = tcp || l.Addr().Network() == "tcp"
		go func() { serveErr <- srv.Serve(l) }()
	}
	attrs := []any{"addrs", addrs, "data_dir", cfg.DataDir, "claude", bin, "claude_version", claudeVersion}
	if tcp {
		attrs = append(attrs, "local_token_file", localtoken.Path(cfg.DataDir))
	}
	log.Info("agent serving", attrs...)
	if cfg.Ready != nil {
		cfg.Ready(addrs)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-serveErr:
		log.Error("agent: listener failed", "err", runErr)
	}
	// Health says NOT_SERVING from the start of the drain; the listeners
	// and the relay tunnel stay up so that clients see their turns end and
	// a new message gets a clear refusal.
	hs.Shutdown()
	if runErr == nil {
		drain(mgr, cfg, log)
	}
	log.Info("agent shutting down")
	stopLink()
	<-linkDone
	<-notifyDone
	<-shareDone
	web.close(cfg.ShutdownTimeout)
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	closeCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := mgr.Close(closeCtx); err != nil {
		log.Error("agent: closing sessions", "err", err)
	}
	select {
	case <-stopped:
	case <-closeCtx.Done():
		log.Warn("agent: streams did not end in time; closing them")
		srv.Stop()
		<-stopped
	}
	for _, a := range cfg.Listen {
		if p, ok := strings.CutPrefix(a, "unix://"); ok {
			os.Remove(p)
		}
	}
	log.Info("agent stopped")
	return runErr
}

// featureFlags are the flags --feature-flag turns on.
func featureFlags(cfg Config) []string { return setting[[]string](cfg, "feature-flag") }

// setting is a setting that only the settings snapshot carries (zero
// without one).
func setting[T any](cfg Config, key string) T {
	v, _ := settingsSnapshot(cfg).Settings[key].Value.(T)
	return v
}

// machineIDOf reads the machine id from this machine's certificate.
func machineIDOf(certFile string) (string, error) {
	b, err := os.ReadFile(certFile)
	if err != nil {
		return "", fmt.Errorf("read the machine certificate: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return "", fmt.Errorf("machine certificate %s: no PEM block", certFile)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return "", fmt.Errorf("machine certificate %s: %w", certFile, err)
	}
	return mtls.MachineIDOfCert(cert)
}

func listen(addr string, cfg Config) (net.Listener, error) {
	if p, ok := strings.CutPrefix(addr, "unix://"); ok {
		return listenUnix(p)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: want unix:///path or host:port: %w", addr, err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if cfg.TLSCert == "" && !mtls.LoopbackHost(host) {
		l.Close()
		return nil, fmt.Errorf("refusing to serve %s without TLS off loopback: set --tls-cert and --tls-key, or listen on 127.0.0.1", addr)
	}
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("load --tls-cert/--tls-key: %w", err)
		}
		tcfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
		if cfg.TLSClientCA != "" {
			pem, err := os.ReadFile(cfg.TLSClientCA)
			if err != nil {
				l.Close()
				return nil, fmt.Errorf("read --tls-client-ca: %w", err)
			}
			tcfg.ClientCAs = x509.NewCertPool()
			if !tcfg.ClientCAs.AppendCertsFromPEM(pem) {
				l.Close()
				return nil, fmt.Errorf("--tls-client-ca %s: no PEM certificate found", cfg.TLSClientCA)
			}
			// Clients without a certificate may still come with the token.
			tcfg.ClientAuth = tls.VerifyClientCertIfGiven
		}
		return localtoken.TLSListener(tls.NewListener(l, tcfg)), nil
	}
	return l, nil
}

func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create socket dir: %w", err)
	}
	if _, err := os.Stat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("another agent is already listening on %s", path)
		}
		os.Remove(path) // stale socket of a dead agent
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on unix socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("restrict socket %s: %w", path, err)
	}
	return l, nil
}
