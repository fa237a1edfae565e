package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/webapi"
)

// WebConfig is the web API and web app the relay serves (docs/web-api.md).
type WebConfig struct {
	// Listen is an optional separate host:port for the web API and app
	// (TLS with the relay's certificate unless it is a loopback address).
	// Empty: they share the public TLS port, where every request that is
	// not gRPC (Content-Type application/grpc*) goes to them.
	Listen string
	// Origins are extra origins (scheme://host[:port]) whose pages may
	// open the WebSocket, besides the relay's own host.
	Origins []string
	// Static is the built web app; nil serves the API only.
	Static fs.FS
}

// Validate checks the listen address and the origins.
func (c *WebConfig) Validate() error {
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return fmt.Errorf("--http-listen %q: want HOST:PORT: %w", c.Listen, err)
		}
	}
	for _, o := range c.Origins {
		u, err := url.Parse(o)
		if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("--web-origin %q: want scheme://host[:port], e.g. https://betcode.example.com", o)
		}
	}
	return nil
}

// isGRPC reports whether a request on the public port is a gRPC call (the
// router's) rather than the web app's.
func isGRPC(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc")
}

// splitWeb sends gRPC calls to grpcH and everything else to web.
func splitWeb(grpcH, web http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isGRPC(r) {
			grpcH.ServeHTTP(w, r)
			return
		}
		web.ServeHTTP(w, r)
	})
}

// webFront serves a browser's request with web: the request marks its
// connection as serving the web app while it runs (connGuard), and its
// context carries the browser's address and connection to the gateway's
// calls (gatewayConn).
func webFront(web http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := webClient{remote: r.RemoteAddr}
		if cg := guardFrom(r.Context()); cg != nil {
			defer cg.begin()()
			c.connID = cg.id
			w = handOffWriter{ResponseWriter: w, g: cg}
		}
		// Only another replica may send these (relay/auth); the gateway
		// does not pass them on, and they are dropped here already.
		r.Header.Del(auth.ForwardedByHeader)
		r.Header.Del(auth.UserHeader)
		web.ServeHTTP(w, r.WithContext(withWebClient(r.Context(), c)))
	})
}

// webServer is the web side of the relay: the gateway, its in-memory path
// into the client handler, and the separate listener if there is one.
type webServer struct {
	cfg     WebConfig
	log     *slog.Logger
	guards  *guards
	path    *gatewayPath
	gateway *webapi.Handler
	srv     *http.Server // the separate listener's, or nil
	ln      net.Listener
}

// webOptions is what the web server is built from.
type webOptions struct {
	Config WebConfig
	// Authenticate and Route are the public port's client handler:
	// auth.Middleware and the router.
	Authenticate func(http.Handler) http.Handler
	Route        http.Handler
	Log          *slog.Logger
	Registerer   prometheus.Registerer
	// Push serves /api/push (relay/push); PushInfo tells /api/info about
	// it. Both nil: no Web Push.
	Push     http.Handler
	PushInfo func() (bool, string)
	// OIDC serves /api/oidc/... (relay/oidcsvc's web sign-in); nil: no
	// single sign-on in the web app.
	OIDC http.Handler
}

func newWebServer(opt webOptions) (*webServer, error) {
	s := &webServer{cfg: opt.Config, log: opt.Log, guards: &guards{}}
	var err error
	if s.path, err = newGatewayPath(gatewayHandler(s.guards, opt.Authenticate, opt.Route), opt.Log); err != nil {
		return nil, fmt.Errorf("relay: web gateway connection: %w", err)
	}
	s.gateway, err = webapi.New(webapi.Options{
		Conn: s.path.conn(), Role: webapi.RoleRelay, Version: Version, Static: opt.Config.Static,
		AllowedOrigins: opt.Config.Origins, Log: opt.Log, Registerer: opt.Registerer,
		Push: opt.Push, PushInfo: opt.PushInfo, OIDC: opt.OIDC,
	})
	if err != nil {
		s.path.close()
		return nil, fmt.Errorf("relay: web API: %w", err)
	}
	return s, nil
}

// publicHandler is the handler of the public TLS port: the client handler
// for gRPC, and the web app for the rest unless it has its own listener.
func (s *webServer) publicHandler(client http.Handler) http.Handler {
	if s.cfg.Listen != "" {
		where := s.cfg.Listen
		return splitWeb(client, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "this port serves gRPC; the web app is on "+where, http.StatusUnsupportedMediaType)
		}))
	}
	return splitWeb(client, webFront(s.gateway))
}

// listen opens the separate web listener, if configured: TLS with the
// relay's certificate (h2 and http/1.1), or plain HTTP on loopback.
func (s *webServer) listen(certFile, keyFile string, handshakeTimeout time.Duration) error {
	if s.cfg.Listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen for the web app on %s: %w", s.cfg.Listen, err)
	}
	s.srv = &http.Server{
		Handler:           webFront(s.gateway),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(&handshakeLog{s.log}, "", 0),
		ConnContext:       s.guards.connContext(handshakeTimeout, false),
	}
	if !mtls.LoopbackAddr(s.cfg.Listen) {
		cfg, err := mtls.ServerConfig(certFile, keyFile, "", mtls.VerifyClientCertIfGiven)
		if err != nil {
			ln.Close()
			return err
		}
		cfg.NextProtos = []string{"h2", "http/1.1"}
		s.srv.TLSConfig = cfg
		ln = tls.NewListener(ln, cfg)
	}
	s.ln = ln
	return nil
}

// serve serves the separate listener until it is closed.
func (s *webServer) serve() error {
	if s.srv == nil {
		return nil
	}
	proto := "https"
	if s.srv.TLSConfig == nil {
		proto = "http"
	}
	s.log.Info("relay web app", "url", proto+"://"+s.ln.Addr().String()+"/")
	return s.srv.Serve(s.ln)
}

// shutdown ends the WebSockets (close 1001: hijacked connections that no
// http.Server waits for) and drains the separate listener. The in-memory
// path stays for the public port's REST calls still being drained; close
// ends it.
func (s *webServer) shutdown(ctx context.Context) {
	s.gateway.Close()
	if s.srv != nil {
		s.ln.Close() // if Serve never ran
		if err := s.srv.Shutdown(ctx); err != nil {
			s.srv.Close()
		}
	}
}

// close ends the in-memory path, and with it any gateway call left.
func (s *webServer) close() { s.path.close() }
