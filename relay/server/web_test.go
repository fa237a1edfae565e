package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/relay/limits"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/store/storetest"
)

// webRelay is a relay run in-process for the web tests.
type webRelay struct {
	addr    string
	caFile  string
	cfg     Config
	tlsConf *tls.Config // a browser's: trusts the relay's CA
}

func startWebRelay(t *testing.T, mod func(*Config)) *webRelay {
	t.Helper()
	dir := t.TempDir()
	if _, err := pki.Init(dir, []string{"localhost", "127.0.0.1"}, pki.Options{}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Listen: "127.0.0.1:0", TLSCert: filepath.Join(dir, pki.RelayCertFile), TLSKey: filepath.Join(dir, pki.RelayKeyFile),
		ClientCA: filepath.Join(dir, pki.CACertFile), DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler),
		Web: WebConfig{Static: fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>BetCode</title>")}}},
	}
	if mod != nil {
		mod(&cfg)
	}
	ready := make(chan net.Addr, 1)
	cfg.Ready = func(a net.Addr) { ready <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	pem, err := os.ReadFile(cfg.ClientCA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	return &webRelay{addr: addr.String(), caFile: cfg.ClientCA, cfg: cfg, tlsConf: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}}
}

// client returns an HTTP client speaking h2 (or only HTTP/1.1).
func (r *webRelay) client(h2 bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: r.tlsConf.Clone(), ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// dialHTTP1 opens a TLS connection negotiating http/1.1.
func (r *webRelay) dialHTTP1(t *testing.T) *tls.Conn { return r.dialTLS(t, "http/1.1") }

// dialTLS opens a TLS connection to the public port that negotiates proto,
// closed when the test ends.
func (r *webRelay) dialTLS(t *testing.T, proto string) *tls.Conn {
	t.Helper()
	cfg := r.tlsConf.Clone()
	cfg.NextProtos = []string{proto}
	c, err := tls.Dial("tcp", r.addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if p := c.ConnectionState().NegotiatedProtocol; p != proto {
		t.Fatalf("negotiated %q; want %s", p, proto)
	}
	return c
}

// token stores a user and a token of theirs in the relay's store.
func (r *webRelay) token(t *testing.T, user string) string {
	t.Helper()
	ctx := context.Background()
	st, err := OpenStore(ctx, "", r.cfg.DataDir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return storetest.UserToken(t, st, user)
}

// get sends one HTTP/1.1 request on c and reads the answer.
func get(t *testing.T, c net.Conn, br *bufio.Reader, path string, header ...string) *http.Response {
	t.Helper()
	req := "GET " + path + " HTTP/1.1\r\nHost: " + c.RemoteAddr().String() + "\r\n"
	for i := 0; i+1 < len(header); i += 2 {
		req += header[i] + ": " + header[i+1] + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp
}

// waitClosed reports whether the peer closes c within d (reads until EOF).
func waitClosed(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	c.SetReadDeadline(time.Time{})
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func TestWebOnPublicPort(t *testing.T) {
	r := startWebRelay(t, func(c *Config) { c.Web.Origins = []string{"https://app.example"} })
	for _, tt := range []struct {
		name      string
		h2        bool
		path      string
		wantProto string
		wantBody  string
	}{
		{"health over HTTP/2", true, "/api/health", "HTTP/2.0", `"role":"relay"`},
		{"health over HTTP/1.1", false, "/api/health", "HTTP/1.1", `"role":"relay"`},
		{"the app over HTTP/2", true, "/", "HTTP/2.0", "<title>BetCode</title>"},
		{"the app over HTTP/1.1", false, "/", "HTTP/1.1", "<title>BetCode</title>"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := r.client(tt.h2).Get("https://" + r.addr + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || resp.Proto != tt.wantProto || !strings.Contains(string(body), tt.wantBody) {
				t.Fatalf("%s %d: %s; want 200 %s with %q", resp.Proto, resp.StatusCode, body, tt.wantProto, tt.wantBody)
			}
		})
	}
	t.Run("API without a token", func(t *testing.T) {
		resp, err := r.client(true).Get("https://" + r.addr + "/api/sessions")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d; want 401", resp.StatusCode)
		}
	})
	for _, tt := range []struct {
		name, origin string
		want         int
	}{
		{"WebSocket from a foreign origin", "https://evil.example", http.StatusForbidden},
		{"WebSocket from the relay's own origin", "https://" + "127.0.0.1", http.StatusSwitchingProtocols},
		{"WebSocket from a --web-origin", "https://app.example", http.StatusSwitchingProtocols},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := r.dialHTTP1(t)
			origin := tt.origin
			if origin == "https://127.0.0.1" {
				origin = "https://" + r.addr
			}
			resp := get(t, c, bufio.NewReader(c), "/api/ws", "Upgrade", "websocket", "Connection", "Upgrade",
				"Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==", "Origin", origin)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d; want %d", resp.StatusCode, tt.want)
			}
		})
	}
	t.Run("gRPC clients are served as before", func(t *testing.T) {
		r.healthClient(t)(t)
	})
	// A browser that sees ENABLE_CONNECT_PROTOCOL opens its WebSocket over
	// HTTP/2 (RFC 8441), which the gateway does not serve: the setting
	// must stay off.
	t.Run("HTTP/2 does not offer WebSockets", func(t *testing.T) {
		h := dialH2Unread(t, r)
		h.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			f, err := h.fr.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
				if v, ok := sf.Value(http2.SettingEnableConnectProtocol); ok && v != 0 {
					t.Fatal("the relay's HTTP/2 server offers extended CONNECT")
				}
				return
			}
		}
	})
}

// The unauthenticated-connection timer (relay/auth) closes a connection
// that never authenticated, but not one serving the web app.
func TestWebConnectionTimer(t *testing.T) {
	const timeout = time.Second
	r := startWebRelay(t, func(c *Config) { c.Calls = limits.Config{HandshakeTimeout: timeout} })
	t.Run("idle connection closed", func(t *testing.T) {
		c := r.dialHTTP1(t)
		if !waitClosed(c, 20*timeout) {
			t.Fatal("an idle unauthenticated connection was not closed")
		}
	})
	t.Run("loading the app keeps it, idle closes it", func(t *testing.T) {
		c := r.dialHTTP1(t)
		br := bufio.NewReader(c)
		start := time.Now()
		n := 0
		for time.Since(start) < 4*timeout {
			if resp := get(t, c, br, "/index.html"); resp.StatusCode != 200 {
				t.Fatalf("GET /index.html: %d", resp.StatusCode)
			}
			n++
		}
		t.Logf("%d requests on one connection over %v", n, time.Since(start).Round(time.Millisecond))
		if !waitClosed(c, 20*timeout) {
			t.Fatal("the connection was not closed once idle")
		}
	})
	t.Run("a WebSocket awaiting hello keeps it", func(t *testing.T) {
		c := r.dialHTTP1(t)
		resp := get(t, c, bufio.NewReader(c), "/api/ws", "Upgrade", "websocket", "Connection", "Upgrade",
			"Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==", "Origin", "https://"+r.addr)
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %d", resp.StatusCode)
		}
		if waitClosed(c, 4*timeout) {
			t.Fatal("the WebSocket's connection was closed by the unauthenticated-connection timer")
		}
	})
	t.Run("an authenticated API call keeps it", func(t *testing.T) {
		tok := r.token(t, "alice")
		c := r.dialHTTP1(t)
		br := bufio.NewReader(c)
		if resp := get(t, c, br, "/api/me", "Authorization", "Bearer "+tok); resp.StatusCode != 200 {
			t.Fatalf("GET /api/me: %d", resp.StatusCode)
		}
		if waitClosed(c, 4*timeout) {
			t.Fatal("a connection whose call authenticated was closed")
		}
		if resp := get(t, c, br, "/api/health"); resp.StatusCode != 200 {
			t.Fatalf("GET /api/health after idling: %d", resp.StatusCode)
		}
	})
}

func TestWebOwnListener(t *testing.T) {
	for _, tt := range []struct {
		name, host, scheme string
	}{
		{"loopback: plain HTTP", "127.0.0.1", "http"},
		{"other addresses: TLS with the relay's certificate", "0.0.0.0", "https"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", tt.host+":0")
			if err != nil {
				t.Fatal(err)
			}
			_, port, _ := net.SplitHostPort(ln.Addr().String())
			ln.Close()
			r := startWebRelay(t, func(c *Config) { c.Web.Listen = net.JoinHostPort(tt.host, port) })
			for _, h2 := range []bool{false, true} {
				if tt.scheme == "http" && h2 {
					continue
				}
				resp, err := r.client(h2).Get(tt.scheme + "://127.0.0.1:" + port + "/api/health")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 || h2 && resp.Proto != "HTTP/2.0" {
					t.Fatalf("own listener: %s %d", resp.Proto, resp.StatusCode)
				}
			}
			resp, err := r.client(true).Get("https://" + r.addr + "/api/health")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnsupportedMediaType {
				t.Fatalf("public port with --http-listen: %d; want 415 (gRPC only there)", resp.StatusCode)
			}
		})
	}
}

func TestValidateWeb(t *testing.T) {
	for _, tt := range []struct {
		cfg     WebConfig
		wantErr string
	}{
		{WebConfig{}, ""},
		{WebConfig{Listen: "127.0.0.1:8080", Origins: []string{"https://app.example", "http://localhost:5173"}}, ""},
		{WebConfig{Listen: "8080"}, "--http-listen"},
		{WebConfig{Origins: []string{"app.example"}}, "--web-origin"},
		{WebConfig{Origins: []string{"https://app.example/path"}}, "--web-origin"},
	} {
		t.Run(fmt.Sprint(tt.cfg), func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate = %v; want %q", err, tt.wantErr)
			}
		})
	}
}
