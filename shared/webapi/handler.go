package webapi

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Roles a Handler serves as.
const (
	RoleAgent = "agent"
	RoleRelay = "relay"
)

// Limits of the API.
const (
	// MaxBodyBytes is the largest request body and WebSocket message.
	MaxBodyBytes = 32 << 20
	// MaxFiles is the most files one message may carry.
	MaxFiles = 10
	// MaxFileBytes is the most bytes (decoded) the files of one message may
	// carry in all.
	MaxFileBytes = 20 << 20
)

// Options configure a Handler.
type Options struct {
	// Conn reaches the gRPC services: the agent's own server in-process, or
	// the relay's client path. Required.
	Conn grpc.ClientConnInterface
	// Role is RoleAgent or RoleRelay; it decides /api/me, /api/machines and
	// what /api/health and /api/info say. Default RoleAgent.
	Role string
	// Version is the server's version, shown by /api/health and /api/info.
	Version string
	// Static is the built web app (index.html at its root); nil serves no
	// app (non-API paths get 404).
	Static fs.FS
	// AllowedOrigins are the origins (scheme://host[:port]) besides the
	// request's own host whose pages may open the WebSocket.
	AllowedOrigins []string
	// Log receives request failures; never tokens. Default: discard.
	Log *slog.Logger
	// Registerer, if set, receives the handler's metrics.
	Registerer prometheus.Registerer
	// Push serves /api/push and /api/push/... (the relay's push service);
	// nil answers them 404.
	Push http.Handler
	// PushInfo tells /api/info whether push is enabled and the VAPID public
	// key; nil: disabled.
	PushInfo func() (enabled bool, vapidPublicKey string)
	// OIDC serves /api/oidc/... (the relay's web sign-in, relay/oidcsvc);
	// nil answers them 404. /api/info reports "oidc": true when it is set.
	OIDC http.Handler
	// LocalMachine is the machine an agent lists as its only one (and
	// sends in the WebSocket snapshot); ignored on the relay.
	LocalMachine *Machine
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Handler serves the web API. It is safe for concurrent use.
type Handler struct {
	opts      Options
	mux       *http.ServeMux
	static    *staticFS
	metrics   *metrics
	origins   map[string]bool
	agent     pb.AgentServiceClient
	workspace pb.WorkspaceServiceClient
	config    pb.ConfigServiceClient
	machines  pb.MachineServiceClient
	admin     pb.AdminServiceClient
	version   pb.VersionServiceClient
	team      pb.TeamServiceClient

	timing  timing
	rulesMu sync.Mutex // serialises the read-modify-write of permission rules

	hubsMu sync.Mutex // guards hubs
	hubs   map[[32]byte]*watchHub
	hubWG  sync.WaitGroup // the hubs' goroutines

	mu     sync.Mutex // guards closed
	closed bool
	wg     sync.WaitGroup // the sockets' ServeHTTP calls
	ctx    context.Context
	cancel context.CancelFunc
}

// New returns a Handler for opts.
func New(opts Options) (*Handler, error) {
	if opts.Conn == nil {
		return nil, errors.New("webapi: Options.Conn is required")
	}
	switch opts.Role {
	case "":
		opts.Role = RoleAgent
	case RoleAgent, RoleRelay:
	default:
		return nil, errors.New("webapi: Options.Role must be \"agent\" or \"relay\", got " + opts.Role)
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &Handler{
		opts:      opts,
		origins:   map[string]bool{},
		agent:     pb.NewAgentServiceClient(opts.Conn),
		workspace: pb.NewWorkspaceServiceClient(opts.Conn),
		config:    pb.NewConfigServiceClient(opts.Conn),
		machines:  pb.NewMachineServiceClient(opts.Conn),
		admin:     pb.NewAdminServiceClient(opts.Conn),
		version:   pb.NewVersionServiceClient(opts.Conn),
		team:      pb.NewTeamServiceClient(opts.Conn),
		hubs:      map[[32]byte]*watchHub{},
		timing:    defaultTiming,
	}
	for _, o := range opts.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, errors.New("webapi: allowed origin " + o + " is not scheme://host[:port]")
		}
		h.origins[strings.ToLower(u.Scheme+"://"+u.Host)] = true
	}
	var err error
	if h.metrics, err = newMetrics(opts.Registerer); err != nil {
		return nil, err
	}
	if opts.Static != nil {
		h.static = &staticFS{fsys: opts.Static}
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.mux = http.NewServeMux()
	for _, rt := range h.routes() {
		h.mux.Handle(rt.Method+" "+rt.Pattern, h.instrument(rt.Pattern, rt.handler))
	}
	h.mux.Handle("/api/push", h.instrument("/api/push", http.HandlerFunc(h.push)))
	h.mux.Handle("/api/push/", h.instrument("/api/push/", http.HandlerFunc(h.push)))
	h.mux.Handle("/api/oidc/", h.instrument("/api/oidc/", http.HandlerFunc(h.oidc)))
	h.mux.Handle("/api/", h.instrument("/api/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no such API resource: "+r.Method+" "+r.URL.Path)
	})))
	h.mux.HandleFunc("/", h.serveStatic)
	return h, nil
}

// ServeHTTP serves the web API, the WebSocket and the web app.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data: blob:; connect-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	h.mux.ServeHTTP(w, r)
}

// Close ends every open WebSocket (close code 1001) and waits for them;
// later WebSocket requests get 503. REST calls are not affected.
func (h *Handler) Close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	h.hubWG.Wait()
}

func (h *Handler) push(w http.ResponseWriter, r *http.Request) {
	if h.opts.Push == nil {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "push notifications are served by the relay only")
		return
	}
	h.opts.Push.ServeHTTP(w, r)
}

func (h *Handler) oidc(w http.ResponseWriter, r *http.Request) {
	if h.opts.OIDC == nil {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "this server has no single sign-on; log in with a token")
		return
	}
	h.opts.OIDC.ServeHTTP(w, r)
}

// oidcRoutes are the operations Options.OIDC serves (relay only).
var oidcRoutes = []route{
	{Method: http.MethodPost, Pattern: "/api/oidc/device"},
	{Method: http.MethodPost, Pattern: "/api/oidc/device/poll"},
}
