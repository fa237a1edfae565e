// Package server wires the relay together: the store (PostgreSQL, or SQLite
// in the data dir), TLS with optional client certificates on one port, the
// relay's own gRPC services, the router that forwards everything else to
// machines, the web API and app for browsers (web.go), and Prometheus
// metrics on a separate listener.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/betcode-dev/betcode/relay/admin"
	"github.com/betcode-dev/betcode/relay/adminsvc"
	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/enrollsvc"
	"github.com/betcode-dev/betcode/relay/internal/h2front"
	"github.com/betcode-dev/betcode/relay/limits"
	"github.com/betcode-dev/betcode/relay/machinesvc"
	"github.com/betcode-dev/betcode/relay/oidcsvc"
	"github.com/betcode-dev/betcode/relay/peer"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/push"
	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/router"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/postgres"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	"github.com/betcode-dev/betcode/relay/tunnelsvc"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/buildinfo"
	"github.com/betcode-dev/betcode/shared/healthdetail"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/telemetry"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// Version is the relay's version, set by the command.
var Version = buildinfo.Dev

// Config is the relay's configuration.
type Config struct {
	Listen          string // host:port for clients and agents (TLS)
	TLSCert, TLSKey string // the relay's certificate
	ClientCA        string // CA that signs machine certificates
	DataDir         string // SQLite store when DatabaseURL is empty
	DatabaseURL     string // PostgreSQL (pgx) URL
	MetricsListen   string // host:port for /metrics; empty disables
	// AdvertiseAddr is the host:port other replicas reach this one at (the
	// same TLS port). Empty: a single replica, no forwarding between
	// replicas. Set, it needs DatabaseURL (the store replicas share).
	AdvertiseAddr     string
	HeartbeatInterval time.Duration
	Limits            store.Limits
	// CAKey is the key of ClientCA: with it the relay enrolls machines
	// (EnrollService) and renews their certificates. Empty: machines use
	// certificates from `betcode-relay certs machine` only.
	CAKey string
	// Calls bounds clients' calls and connections (relay/limits); zero
	// fields take its defaults.
	Calls limits.Config
	// MachineCertLifetime is the lifetime of certificates the relay signs
	// (default 30 days; agents renew at two thirds).
	MachineCertLifetime time.Duration
	// MaxMachinesPerOwner bounds the machines one user (their own) or one
	// team may enroll (default enrollsvc.DefaultMaxMachines; negative: no
	// limit).
	MaxMachinesPerOwner int
	// OIDC is OpenID Connect sign-in (`betcode login --oidc`); the zero
	// value disables it.
	OIDC oidcsvc.Config
	// Web is the web API and app (docs/web-api.md): on the public port,
	// or on a listener of their own.
	Web WebConfig
	// PushSubject is the VAPID contact of Web Push (mailto: or https:
	// URL, docs/push.md); empty: no Web Push.
	PushSubject string
	// PushPrivateEndpoints lets machines' own push messages (SendPush) go
	// to http endpoints and non-public addresses: a private push service,
	// or tests' loopback one.
	PushPrivateEndpoints bool
	ShutdownTimeout      time.Duration
	// DrainGrace bounds the drain that follows ctx's end (SIGTERM): new
	// calls and tunnels refused, streams ended for clients to resume
	// elsewhere, agents told to reconnect (drain.go). Default
	// DefaultDrainGrace.
	DrainGrace time.Duration
	// Force, if set, ends the drain at once when closed (a second
	// signal).
	Force  <-chan struct{}
	Logger *slog.Logger
	// Tracing, if set, traces forwarded calls (docs/observability.md).
	Tracing *telemetry.Tracing
	// Ready, if set, is called with the bound address once serving.
	Ready func(addr net.Addr)
	// Bootstrap, if set, is called once the store is open, before the
	// relay serves (serve's --bootstrap-admin: the first administrator of
	// an empty store, admin.Ops.Bootstrap); an error stops the relay.
	Bootstrap func(ctx context.Context, ops *admin.Ops) error
	// Front names the HTTP/2 server that faces gRPC clients: FrontEngine
	// (the default, docs/relay-h2-engine.md) or FrontNetHTTP.
	Front string
	// MinAgentVersion is the oldest betcode-agent that may register
	// (tunnelsvc.Service.MinAgentVersion; empty: the previous minor release).
	MinAgentVersion string
}

// The relay's HTTP/2 fronts (Config.Front, --front).
const (
	// FrontNetHTTP serves every client connection on net/http's HTTP/2
	// server, and carries calls on agents' direct connections with
	// net/http's HTTP/2 client.
	FrontNetHTTP = "net/http"
	// FrontEngine serves the connections of gRPC clients (those that
	// offered only h2) on the relay's own HTTP/2 server
	// (relay/internal/h2front), and carries calls on agents' direct
	// connections with its own client (shared/h2client): one
	// reader goroutine per connection and each direction of a unary
	// call in one write. Browsers stay on net/http.
	FrontEngine = "engine"
)

// Validate reports missing settings, naming the flag.
func (c *Config) Validate() error {
	var missing []string
	if c.Listen == "" {
		missing = append(missing, "--listen")
	}
	if c.TLSCert == "" || c.TLSKey == "" {
		missing = append(missing, "--tls-cert and --tls-key (create them with `betcode-relay certs init`)")
	}
	if c.ClientCA == "" {
		missing = append(missing, "--client-ca (the CA that signs machine certificates)")
	}
	if c.DatabaseURL == "" && c.DataDir == "" {
		missing = append(missing, "--database-url or --data-dir")
	}
	if len(missing) > 0 {
		return errors.New("relay: missing " + strings.Join(missing, ", "))
	}
	if err := c.Calls.Validate(); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	if err := c.OIDC.Validate(); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	if err := c.Web.Validate(); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	switch c.Front {
	case "", FrontNetHTTP, FrontEngine:
	default:
		return fmt.Errorf("relay: --front %q: want %s or %s", c.Front, FrontNetHTTP, FrontEngine)
	}
	if c.AdvertiseAddr != "" {
		if c.DatabaseURL == "" {
			return errors.New("relay: --advertise-addr (several replicas) needs --database-url: replicas share their state in PostgreSQL, SQLite serves one replica only")
		}
		if _, _, err := net.SplitHostPort(c.AdvertiseAddr); err != nil {
			return fmt.Errorf("relay: --advertise-addr %q: want HOST:PORT: %w", c.AdvertiseAddr, err)
		}
	}
	return nil
}

// engine reports whether gRPC clients get the relay's own HTTP/2 engine.
func (c *Config) engine() bool { return c.Front != FrontNetHTTP }

func (c *Config) setDefaults() {
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 30 * time.Second
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.DrainGrace <= 0 {
		c.DrainGrace = DefaultDrainGrace
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Limits = c.Limits.WithDefaults()
}

// OpenStore opens PostgreSQL when databaseURL is set, else SQLite in dataDir.
func OpenStore(ctx context.Context, databaseURL, dataDir string, log *slog.Logger) (store.Store, error) {
	if databaseURL != "" {
		return postgres.Open(ctx, databaseURL, postgres.Options{Logger: log})
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	return sqlite.Open(ctx, filepath.Join(dataDir, "relay.db"), sqlite.Options{Logger: log})
}

// Run serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg.setDefaults()
	lg := cfg.Logger
	tlsCfg, err := mtls.ServerConfig(cfg.TLSCert, cfg.TLSKey, cfg.ClientCA, mtls.VerifyClientCertIfGiven)
	if err != nil {
		return err
	}
	var ca *pki.CA
	if cfg.CAKey != "" {
		if ca, err = pki.LoadCA(cfg.ClientCA, cfg.CAKey); err != nil {
			return fmt.Errorf("relay: --ca-key: %w", err)
		}
	}
	st, err := OpenStore(ctx, cfg.DatabaseURL, cfg.DataDir, lg)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	tunnels := registry.New()

	// Identity: tokens, teams and revocations, invalidated through the
	// store's change notifications. A revoked or deleted machine's tunnel
	// is closed at once on whichever replica holds it.
	lim, err := limits.New(cfg.Calls)
	if err != nil {
		return err
	}
	var calls *callLimits
	var routerRef atomic.Pointer[router.Router] // its copies of machine records are forgotten on a change
	authn := auth.New(st, auth.Options{Log: lg, Registerer: reg, Limit: func(w http.ResponseWriter, r *http.Request, id auth.Identity) bool {
		return calls.allow(w, r, id)
	}, OnMachineChange: func(id string) {
		if r := routerRef.Load(); r != nil {
			r.ForgetMachine(id)
		}
		if t := tunnels.Get(id); t != nil {
			lg.Info("relay: closing the tunnel of a revoked machine", "machine_id", id)
			t.Client.Close()
		}
	}})
	calls = newCallLimits(lim, authn.Audit, reg)
	authCtx, stopAuth := context.WithCancel(ctx)
	defer stopAuth()
	authDone := make(chan struct{})
	go func() {
		defer close(authDone)
		authn.Run(authCtx)
	}()
	defer func() { stopAuth(); <-authDone }()
	select {
	case <-authn.Ready():
	case <-time.After(30 * time.Second):
		return errors.New("relay: could not load machine revocations from the store within 30s")
	case <-ctx.Done():
		return ctx.Err()
	}
	// Every handshake with a machine certificate checks it against the
	// revocations (machine id and serial), on every replica.
	tlsCfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.VerifiedChains) == 0 {
			return nil
		}
		if _, relay := mtls.PeerRelay(&cs); relay {
			return nil
		}
		id, err := mtls.MachineID(cs)
		if err != nil {
			return nil // not a machine certificate: TunnelService refuses it
		}
		if authn.MachineRevoked(id, mtls.SerialHex(cs.PeerCertificates[0])) {
			return fmt.Errorf("the certificate of machine %q was revoked", id)
		}
		return nil
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "betcode_relay_connected_machines", Help: "Machines with a live tunnel to this replica.",
	}, func() float64 { return float64(tunnels.Len()) }))
	if bs, ok := st.(router.BufferStats); ok {
		bc := router.NewBufferCollector(bs)
		bc.PresenceTTL = 3 * cfg.HeartbeatInterval // as presenceTTL below
		reg.MustRegister(bc)
	}

	// A machine's recorded replica is live for three heartbeats: a replica
	// that crashed stops refreshing it and its machines go OFFLINE.
	presenceTTL := 3 * cfg.HeartbeatInterval
	var peers *peer.Forwarder
	if cfg.AdvertiseAddr != "" {
		newPeers := peer.New
		if cfg.engine() {
			newPeers = peer.NewEngine
		}
		if peers, err = newPeers(cfg.TLSCert, cfg.TLSKey, cfg.ClientCA); err != nil {
			return err
		}
		defer peers.Close()
	}
	drain := newDrain(lg, reg)
	// The relay's own services are gated by the drain as forwarded calls
	// are (drain_local.go).
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(drain.unaryInterceptor), grpc.ChainStreamInterceptor(drain.streamInterceptor))
	rt := &router.Router{Gate: drain,
		Local: gs, Auth: authn, Streams: calls, MaxMessageBytes: lim.Config().MaxMessageBytes, Registry: tunnels, Store: st, Limits: cfg.Limits, Log: lg, Metrics: router.NewMetrics(reg),
		Self: cfg.AdvertiseAddr, Peers: peers, PresenceTTL: presenceTTL,
	}
	if cfg.Tracing != nil {
		rt.Tracing = cfg.Tracing
	}
	routerRef.Store(rt)
	// Web Push: watches each connected machine's sessions and serves
	// /api/push through the web API.
	pushSvc, err := push.New(ctx, push.Options{Store: st, Auth: authn, Log: lg, Registerer: reg, Subject: cfg.PushSubject,
		AllowPrivateEndpoints: cfg.PushPrivateEndpoints})
	if err != nil {
		return fmt.Errorf("relay: web push: %w", err)
	}
	defer pushSvc.Close()
	tsvc := &tunnelsvc.Service{
		Store: st, Registry: tunnels, Log: lg, HeartbeatInterval: cfg.HeartbeatInterval, Engine: cfg.engine(), MinAgentVersion: cfg.MinAgentVersion, Version: Version,
		OnOnline: func(ctx context.Context, t *registry.Tunnel) {
			pushSvc.WatchTunnel(t)
			rt.Deliver(ctx, t)
		},
		Replica: cfg.AdvertiseAddr, Draining: drain.Draining, Revoked: func(id string) bool { return authn.MachineRevoked(id, "") }, Audit: authn.Audit,
		Metrics: tunnelsvc.NewMetrics(reg), Push: pushSvc,
	}
	pb.RegisterTunnelServiceServer(gs, drainTunnels{tsvc, drain})
	// Enroll answers clients (a join token authenticates them); renewals
	// come over the machines' own mTLS connections.
	enroll := &enrollsvc.Service{Store: st, CA: ca, Lifetime: cfg.MachineCertLifetime, MaxMachines: cfg.MaxMachinesPerOwner, Log: lg, IsRevoked: authn.MachineRevoked}
	pb.RegisterEnrollServiceServer(gs, enroll)
	ops := &admin.Ops{Store: st, Log: lg}
	if cfg.Bootstrap != nil {
		if err := cfg.Bootstrap(ctx, ops); err != nil {
			return fmt.Errorf("relay: %w", err)
		}
	}
	adminSvc := adminsvc.New(ops)
	adminSvc.Online = func(m *store.Machine) bool {
		return tunnels.Get(m.ID) != nil || cfg.AdvertiseAddr != "" && m.LiveReplica(time.Now(), presenceTTL) != ""
	}
	pb.RegisterAdminServiceServer(gs, adminSvc)
	// Sign-in needs no token (it is how a client gets one): its calls are
	// open methods, limited per address like enrollment.
	var flowKey []byte // web sign-ins may poll any replica: they share the key
	if cfg.OIDC.Enabled() {
		if flowKey, err = push.SharedKey(ctx, st, "betcode web device flow v1"); err != nil {
			return fmt.Errorf("relay: %w", err)
		}
	}
	oidcSvc, err := oidcsvc.New(cfg.OIDC, oidcsvc.Options{Store: st, Ops: ops, Audit: authn.Audit, Log: lg, FlowKey: flowKey})
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	pb.RegisterOIDCServiceServer(gs, oidcSvc)
	pb.RegisterMachineServiceServer(gs, &machinesvc.Service{Store: st, Auth: authn, Registry: tunnels, Self: cfg.AdvertiseAddr, PresenceTTL: presenceTTL})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	started := time.Now()
	kind := storeKind(cfg)
	var lastConnected atomic.Int64
	lastConnected.Store(time.Now().UnixNano())
	pb.RegisterBetCodeHealthServer(gs, &healthdetail.Server{
		Checks: []healthdetail.Check{
			{Name: "store", Critical: true, Run: func(ctx context.Context) (bool, string) {
				if _, err := st.ListMachines(ctx, "health-check"); err != nil {
					return false, "store query failed: " + err.Error()
				}
				return true, kind
			}},
			{Name: "grpc_server", Critical: true, Run: func(context.Context) (bool, string) {
				if drain.Draining() {
					return false, "draining: shutting down"
				}
				return true, "accepting connections"
			}},
			{Name: "tunnel_registry", Run: func(context.Context) (bool, string) {
				n := tunnels.Len()
				if n > 0 {
					lastConnected.Store(time.Now().UnixNano())
					return true, fmt.Sprintf("%d machines connected", n)
				}
				since := time.Unix(0, lastConnected.Load())
				return time.Since(since) < 5*time.Minute, "no machine connected since " + since.Format(time.RFC3339)
			}},
		},
		Metadata: func() map[string]string {
			return map[string]string{"version": Version, "uptime": time.Since(started).Round(time.Second).String()}
		},
	})
	// Agents (connections with a machine certificate) get grpc-go's own
	// transport with --front=net/http, else its ServeHTTP behind the
	// relay's own HTTP/2 server (agentFront below); the same services
	// answer clients through the router.
	agents := grpc.NewServer(grpc.Creds(handshaken{}),
		// Thousands of mostly idle tunnels: on Linux the transport reads
		// into pooled buffers only once data has arrived (readyConn), and
		// grpc-go returns write buffers to a pool between flushes, so an
		// idle tunnel holds neither. A TLS read returns at most one record
		// (16 KiB), so a larger read buffer would not be filled.
		grpc.ReadBufferSize(16<<10),
		// Agents make a handful of calls per connection: no HPACK dynamic
		// table for their request headers (0.4 KiB per idle tunnel).
		grpc.HeaderTableSize(0),
		// Static windows, as the agents' side has: grpc-go's BDP estimation
		// would send a ping (and its ack would come back) on most calls.
		grpc.InitialWindowSize(1<<20), grpc.InitialConnWindowSize(4<<20),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))
	pb.RegisterTunnelServiceServer(agents, drainTunnels{tsvc, drain})
	pb.RegisterEnrollServiceServer(agents, enroll)
	healthpb.RegisterHealthServer(agents, hs)

	// The web API and app: the gateway reaches machines through the very
	// handler below (auth.Middleware over the router), in-process.
	var oidcWeb http.Handler // single sign-on in the web app, if configured
	if cfg.OIDC.Enabled() {
		oidcWeb = oidcSvc.Handler()
	}
	web, err := newWebServer(webOptions{
		Config: cfg.Web, Authenticate: authn.Middleware, Route: rt, Log: lg, Registerer: reg,
		Push: pushSvc.Handler(), PushInfo: pushSvc.Info, OIDC: oidcWeb,
	})
	if err != nil {
		return err
	}
	webDone := false
	defer func() {
		if !webDone { // an early return
			web.shutdown(context.Background())
		}
		web.close()
	}()
	if err := web.listen(cfg.TLSCert, cfg.TLSKey, lim.Config().HandshakeTimeout); err != nil {
		return err
	}
	// Browsers speak HTTP/1.1 as well as HTTP/2 (a WebSocket needs
	// HTTP/1.1); gRPC clients and agents offer only h2 and get it; an
	// agent's direct connection offers only tunnel.ALPNDirect (the
	// splitter hands it to its tunnel).
	tlsCfg.NextProtos = []string{"h2", "http/1.1", tunnel.ALPNDirect}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{
		Handler:           web.publicHandler(authn.Middleware(rt)),
		TLSConfig:         tlsCfg.Clone(), // Serve edits its copy while the splitter handshakes with tlsCfg
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(&handshakeLog{lg}, "", 0),
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: 1000},
		// A client connection must authenticate a call within the
		// handshake timeout, or it is closed; one serving the web app
		// stays while it is in use (connGuard).
		ConnContext: web.guards.connContext(lim.Config().HandshakeTimeout, true),
	}
	errc := make(chan error, 5)
	split := newSplitter(ln, tlsCfg, lg, splitOptions{MaxPending: lim.Config().MaxPendingConns, HandshakeTimeout: lim.Config().HandshakeTimeout})
	split.plainMachines = cfg.engine() // agentFront below needs no readyConn
	var front *h2front.Server
	if cfg.engine() {
		// gRPC clients get the relay's own HTTP/2 server in front of the
		// same handler; browsers stay on srv.
		// A client whose socket takes nothing for WriteTimeout is gone
		// (a phone between networks): it reconnects and resumes.
		front = &h2front.Server{Handler: srv.Handler, ConnContext: srv.ConnContext, MaxConcurrentStreams: 1000,
			WriteTimeout: 30 * time.Second, Log: lg}
		grpcClients := split.withGRPCClients()
		go func() { errc <- front.Serve(grpcClients) }()
	}
	split.tunnels = tunnels
	split.directs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "betcode_relay_direct_connections_total",
		Help: "Agents' direct connections for their calls (docs/relay.md), by outcome: accepted, or refused (no machine certificate, no tunnel on this replica, a wrong token).",
	}, []string{"outcome"})
	split.directs.WithLabelValues("accepted")
	split.directs.WithLabelValues("refused")
	reg.MustRegister(split.directs)
	splitDone := make(chan struct{})
	go func() {
		defer close(splitDone)
		split.run()
	}()
	go func() { errc <- srv.Serve(split.clients) }()
	var agentFront *h2front.Server
	if cfg.engine() {
		// Agents' connections on the relay's own HTTP/2 server too: an
		// idle tunnel (OpenTunnel, served by grpcstream and detached from
		// its request's goroutine) then costs its connection one goroutine
		// instead of grpc-go's transport's four, and no read buffer while idle
		// (docs/benchmarks-relay.md, "Scale"). Their other calls
		// (Register, Heartbeat, Renew...) go to grpc-go's ServeHTTP.
		// Keepalive as grpc-go's was: a PING after 30 s of silence, the
		// connection closed 10 s later if unanswered (an agent gone
		// without a FIN).
		agentFront = &h2front.Server{
			Handler:      agentHandler(drainTunnels{tsvc, drain}, agents),
			StreamWindow: 1 << 20, ConnWindow: 4 << 20, MaxConcurrentStreams: 100, NoDynamicTables: true,
			WriteTimeout: 30 * time.Second, KeepaliveTime: 30 * time.Second, KeepaliveTimeout: 10 * time.Second, Log: lg,
		}
		go func() { errc <- agentFront.Serve(split.machines) }()
	} else {
		go func() { errc <- agents.Serve(split.machines) }()
	}
	if web.srv != nil {
		go func() { errc <- web.serve() }()
	}

	var msrv *http.Server
	if cfg.MetricsListen != "" {
		mln, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			srv.Close()
			return fmt.Errorf("listen for metrics on %s: %w", cfg.MetricsListen, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
		mux.Handle("/readyz", readyz(hs)) // readiness: 503 once draining
		msrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- msrv.Serve(mln) }()
		lg.Info("relay metrics", "addr", mln.Addr().String())
	}
	purgeCtx, stopPurge := context.WithCancel(ctx)
	defer stopPurge()
	go purgeLoop(purgeCtx, st, lg)

	lg.Info("relay serving", "addr", ln.Addr().String(), "store", kind, "advertise_addr", cfg.AdvertiseAddr, "oidc_issuer", cfg.OIDC.Issuer)
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr())
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	grace := cfg.DrainGrace
	if runErr != nil { // a server failed: no signal, no deploy
		grace = cfg.ShutdownTimeout
	}
	lg.Info("relay shutting down: draining", "grace", grace)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if cfg.Force != nil {
		go func() {
			select {
			case <-cfg.Force:
				cancel()
			case <-sctx.Done():
			}
		}()
	}
	drain.run(sctx, drainSteps{
		notReady:      hs.Shutdown,
		closeListener: func() { ln.Close() },
		closeClients: func(ctx context.Context) {
			// WebSockets are hijacked connections Shutdown does not wait
			// for: the gateway ends them first (close 1001); Shutdown then
			// sends clients a GOAWAY and waits for their calls, and the
			// gateway's in-memory path closes last (deferred).
			web.shutdown(ctx)
			frontDone := make(chan struct{})
			go func() {
				defer close(frontDone)
				if front != nil && front.Shutdown(ctx) != nil {
					front.Close()
				}
			}()
			if err := srv.Shutdown(ctx); err != nil {
				srv.Close()
			}
			<-frontDone
		},
		closeTunnels: tunnels.CloseAll, // tunnels are long-lived: end them so Shutdown can finish
		stopAgents: func(ctx context.Context) {
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				if agentFront != nil {
					if agentFront.Shutdown(ctx) != nil {
						agentFront.Close()
					}
					return
				}
				agents.GracefulStop()
			}()
			select {
			case <-stopped:
			case <-ctx.Done():
				if agentFront == nil {
					agents.Stop()
				}
				<-stopped
			}
		},
	})
	webDone = true
	<-splitDone
	if msrv != nil {
		msrv.Close()
	}
	lg.Info("relay stopped")
	if errors.Is(runErr, http.ErrServerClosed) {
		runErr = nil
	}
	return runErr
}

func storeKind(c Config) string {
	if c.DatabaseURL != "" {
		return "postgres"
	}
	return "sqlite:" + filepath.Join(c.DataDir, "relay.db")
}

// purgeLoop deletes expired buffered messages hourly.
func purgeLoop(ctx context.Context, st store.Store, lg *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := st.PurgeExpired(ctx, time.Now()); err != nil && ctx.Err() == nil {
			lg.Warn("relay: purge expired buffered messages", "err", err)
		} else if n > 0 {
			lg.Info("relay: purged expired buffered messages", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// handshakeLog turns net/http's error log (TLS handshake failures above all)
// into one clear structured line each.
type handshakeLog struct{ log *slog.Logger }

func (h *handshakeLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if i := strings.Index(msg, "TLS handshake error from "); i >= 0 {
		rest := msg[i+len("TLS handshake error from "):]
		remote, reason, _ := strings.Cut(rest, ": ")
		h.log.Warn("relay: refused a connection", "remote", remote, "reason", mtls.DescribeHandshakeError(errors.New(reason)))
		return len(p), nil
	}
	h.log.Warn("relay: http", "msg", msg)
	return len(p), nil
}
