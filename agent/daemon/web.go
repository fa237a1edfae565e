package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/betcode-dev/betcode/agent/config"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/webapi"
	"github.com/betcode-dev/betcode/shared/webui"
)

// webServer serves the web app and its API (--http-listen): package
// webapi over an in-process connection to the agent's own gRPC server, so
// that every call passes the same interceptors (local token, version check)
// as a gRPC client's.
type webServer struct {
	http *http.Server
	api  *webapi.Handler
	conn *grpc.ClientConn
	pipe *bufconn.Listener
	addr net.Addr
	done chan struct{} // closed when both serving goroutines returned
}

// webConfigError checks the web listener's settings: off loopback it needs
// TLS or an explicit --http-insecure.
func webConfigError(cfg Config) error {
	if (cfg.HTTPTLSCert == "") != (cfg.HTTPTLSKey == "") {
		return errors.New("set both --http-tls-cert and --http-tls-key, or neither")
	}
	host, _, err := net.SplitHostPort(cfg.HTTPListen)
	if err != nil {
		return fmt.Errorf("--http-listen %q: want host:port: %w", cfg.HTTPListen, err)
	}
	if !mtls.LoopbackHost(host) && cfg.HTTPTLSCert == "" && !cfg.HTTPInsecure {
		return fmt.Errorf("refusing to serve the web app on %s without TLS off loopback: set --http-tls-cert and --http-tls-key, or --http-insecure to send tokens in clear, or listen on 127.0.0.1", cfg.HTTPListen)
	}
	return nil
}

// startWeb listens on cfg.HTTPListen and serves the web API of srv; nil,
// nil when it is disabled. srv must have all its services registered.
func startWeb(cfg Config, srv *grpc.Server, reg prometheus.Registerer, log *slog.Logger) (*webServer, error) {
	if cfg.HTTPListen == "" {
		return nil, nil
	}
	if err := webConfigError(cfg); err != nil {
		return nil, err
	}
	var tcfg *tls.Config
	if cfg.HTTPTLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.HTTPTLSCert, cfg.HTTPTLSKey)
		if err != nil {
			return nil, fmt.Errorf("load --http-tls-cert/--http-tls-key: %w", err)
		}
		// No h2: WebSockets need HTTP/1.1's upgrade.
		tcfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	}
	ln, err := net.Listen("tcp", cfg.HTTPListen)
	if err != nil && cfg.Settings != nil && cfg.Settings.Settings["http-listen"].Source == config.SourceDefault {
		// Only the default address: another agent of this user has it.
		log.Warn("web app not served: its default address is taken; set --http-listen (empty disables it)", "addr", cfg.HTTPListen, "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listen for the web app on %s: %w", cfg.HTTPListen, err)
	}
	w := &webServer{pipe: bufconn.Listen(1 << 20), addr: ln.Addr(), done: make(chan struct{})}
	pipeDone := make(chan struct{})
	go func() {
		defer close(pipeDone)
		_ = srv.Serve(w.pipe) // ends when close closes the pipe
	}()
	w.conn, err = grpc.NewClient("passthrough:///betcode-agent",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return w.pipe.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(4<<20))
	if err != nil {
		ln.Close()
		w.pipe.Close()
		<-pipeDone
		return nil, fmt.Errorf("web API: connect to the agent: %w", err)
	}
	name := cfg.MachineName
	if name == "" {
		name, _ = os.Hostname()
	}
	w.api, err = webapi.New(webapi.Options{
		Conn: w.conn, Role: webapi.RoleAgent, Version: cfg.Version,
		Static:         webui.FS,
		AllowedOrigins: cfg.WebOrigins, Log: log, Registerer: reg,
		LocalMachine: &webapi.Machine{ID: name, Name: name},
	})
	if err != nil {
		ln.Close()
		w.conn.Close()
		w.pipe.Close()
		<-pipeDone
		return nil, err
	}
	w.http = &http.Server{Handler: w.api, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tcfg,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go func() {
		defer func() { <-pipeDone; close(w.done) }()
		var err error
		if tcfg != nil {
			err = w.http.ServeTLS(ln, "", "")
		} else {
			err = w.http.Serve(ln)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			log.Error("web app: listener failed", "err", err)
		}
	}()
	scheme := "http"
	if tcfg != nil {
		scheme = "https"
	}
	log.Info("web app serving", "url", scheme+"://"+ln.Addr().String()+"/")
	return w, nil
}

// close ends the WebSockets and the web listener, waiting up to timeout
// for REST calls in flight, then closes the in-process connection.
func (w *webServer) close(timeout time.Duration) {
	if w == nil {
		return
	}
	w.api.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := w.http.Shutdown(ctx); err != nil {
		w.http.Close()
	}
	w.conn.Close()
	w.pipe.Close()
	<-w.done
}
