package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// appPath is the first thing a browser loading the app asks for.
const appPath = "/"

// browser is a web client of the relay's public TLS port: REST with a real
// HTTP client, the WebSocket with a real WebSocket client.
type browser struct {
	t     *testing.T
	w     *world
	tls   *tls.Config
	http  *http.Client
	token string // "" sends none
}

func (w *world) browser(token string) *browser {
	w.t.Helper()
	pem, err := os.ReadFile(filepath.Join(w.pki, pki.CACertFile))
	if err != nil {
		w.t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
	tr := &http.Transport{TLSClientConfig: cfg.Clone(), ForceAttemptHTTP2: true}
	w.t.Cleanup(tr.CloseIdleConnections)
	return &browser{t: w.t, w: w, tls: cfg, http: &http.Client{Transport: tr, Timeout: 60 * time.Second}, token: token}
}

// do sends a request (header: name, value pairs) and decodes a JSON answer
// into out when out is not nil.
func (b *browser) do(method, path string, body any, out any, header ...string) int {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			b.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, "https://"+b.w.addr+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			b.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

// socket opens the WebSocket /api/ws from a page of origin ("" the relay's
// own).
func (b *browser) socket(ctx context.Context, origin string) (*websocket.Conn, *http.Response, error) {
	if origin == "" {
		origin = "https://" + b.w.addr
	}
	// A WebSocket is an HTTP/1.1 upgrade.
	tr := &http.Transport{TLSClientConfig: b.tls.Clone(), TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	b.t.Cleanup(tr.CloseIdleConnections)
	c, resp, err := websocket.Dial(ctx, "wss://"+b.w.addr+"/api/ws", &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: tr}, HTTPHeader: http.Header{"Origin": {origin}},
	})
	if c != nil {
		c.SetReadLimit(32 << 20)
		b.t.Cleanup(func() { c.CloseNow() })
	}
	return c, resp, err
}

// wsMessage is any message of the WebSocket (the fields the tests read).
type wsMessage struct {
	Type      string          `json:"type"`
	SessionID string          `json:"sessionId"`
	Seq       int64           `json:"seq"`
	Text      string          `json:"text"`
	Code      string          `json:"code"`
	Message   string          `json:"message"`
	Sessions  json.RawMessage `json:"sessions"`
}

func readMessage(ctx context.Context, t *testing.T, c *websocket.Conn) wsMessage {
	t.Helper()
	_, data, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read the WebSocket: %v", err)
	}
	var m wsMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("message %s: %v", data, err)
	}
	return m
}

func writeMessage(ctx context.Context, t *testing.T, c *websocket.Conn, m any) {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, websocket.MessageText, data); err != nil {
		t.Fatalf("write the WebSocket: %v", err)
	}
}

// apiError is the web API's error body.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// The web API on the relay's public TLS port, through to a real agent and
// the real Claude CLI: every call authenticated, authorized and routed as a
// gRPC client's.
func TestWebAPI(t *testing.T) {
	claudePath(t)
	w := newWorld(t, "")
	a := w.startAgent("m1", w.addr)
	alice := w.browser(w.userToken("alice"))
	bob := w.browser(w.userToken("bob"))
	anon := w.browser("")

	t.Run("health", func(t *testing.T) {
		var h struct{ Status, Role, Version string }
		if code := anon.do("GET", "/api/health", nil, &h); code != 200 || h.Status != "ok" || h.Role != "relay" {
			t.Fatalf("GET /api/health: %d %+v", code, h)
		}
	})
	t.Run("the app", func(t *testing.T) {
		resp, err := anon.http.Get("https://" + w.addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !bytes.Contains(bytes.ToLower(body), []byte("<html")) {
			t.Fatalf("GET /: %d %s %.200s; want the app's index.html", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	})
	t.Run("no token", func(t *testing.T) {
		var e apiError
		if code := anon.do("GET", "/api/machines", nil, &e); code != 401 || e.Code != "UNAUTHENTICATED" {
			t.Fatalf("GET /api/machines without a token: %d %+v; want 401 UNAUTHENTICATED", code, e)
		}
	})
	t.Run("alice lists her machine online", func(t *testing.T) {
		var ms []struct {
			ID     string `json:"id"`
			Online bool   `json:"online"`
		}
		if code := alice.do("GET", "/api/machines", nil, &ms); code != 200 || len(ms) != 1 || ms[0].ID != "m1" || !ms[0].Online {
			t.Fatalf("GET /api/machines: %d %+v; want m1 online", code, ms)
		}
	})

	var sessionID string
	t.Run("alice starts a session and watches it", func(t *testing.T) {
		ctx := ctxT(t, 90*time.Second)
		ws, _, err := alice.socket(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			ID string `json:"id"`
		}
		if code := alice.do("POST", "/api/sessions", map[string]any{"cwd": a.project, "prompt": "hello there"}, &s, "X-Betcode-Machine", "m1"); code != 201 || s.ID == "" {
			t.Fatalf("POST /api/sessions: %d %+v; want 201 with an id", code, s)
		}
		sessionID = s.ID
		writeMessage(ctx, t, ws, map[string]any{"type": "hello", "token": alice.token, "machine": "m1",
			"subscriptions": []map[string]any{{"sessionId": s.ID, "afterSequence": 0}}})
		if m := readMessage(ctx, t, ws); m.Type != "snapshot" {
			t.Fatalf("first message %+v; want snapshot", m)
		}
		var text strings.Builder
		for !strings.Contains(text.String(), fakeapi.HelloText) {
			m := readMessage(ctx, t, ws)
			if m.Type == "error" && m.Seq == 0 {
				t.Fatalf("error message: %+v", m)
			}
			if m.Type == "lead_output" && m.SessionID == s.ID {
				text.WriteString(m.Text)
			}
		}
	})
	t.Run("alice lists the session", func(t *testing.T) {
		var ss []struct {
			ID string `json:"id"`
		}
		if code := alice.do("GET", "/api/sessions", nil, &ss, "X-Betcode-Machine", "m1"); code != 200 || sessionID == "" || !containsSession(ss, sessionID) {
			t.Fatalf("GET /api/sessions: %d %+v; want %q in it", code, ss, sessionID)
		}
	})
	t.Run("bob cannot reach alice's machine", func(t *testing.T) {
		var e apiError
		if code := bob.do("GET", "/api/sessions", nil, &e, "X-Betcode-Machine", "m1"); code != 404 || e.Code != "MACHINE_NOT_FOUND" {
			t.Fatalf("bob's GET /api/sessions on m1: %d %+v; want 404 MACHINE_NOT_FOUND", code, e)
		}
		var ms []json.RawMessage
		if code := bob.do("GET", "/api/machines", nil, &ms); code != 200 || len(ms) != 0 {
			t.Fatalf("bob's GET /api/machines: %d %s; want none", code, ms)
		}
		// Audited as any client's attempt, from the browser's address.
		denied := func(evs []store.AuditEvent) *store.AuditEvent {
			for i, e := range evs {
				if e.Action == "access.denied" && e.Actor == "bob" {
					return &evs[i]
				}
			}
			return nil
		}
		ev := denied(waitAudit(t, w.store(), 10*time.Second, func(evs []store.AuditEvent) bool { return denied(evs) != nil }))
		if ev == nil || !strings.HasPrefix(ev.Remote, "127.0.0.1:") {
			t.Fatalf("audit of bob's attempt: %+v; want access.denied from 127.0.0.1", ev)
		}
	})
	t.Run("a browser cannot pose as a forwarding replica", func(t *testing.T) {
		spoof := []string{"X-Betcode-Machine", "m1", "X-Betcode-User", "alice", "X-Betcode-Forwarded-By", w.addr}
		var e apiError
		if code := bob.do("GET", "/api/sessions", nil, &e, spoof...); code != 404 || e.Code != "MACHINE_NOT_FOUND" {
			t.Fatalf("bob claiming to be alice: %d %+v; want 404 MACHINE_NOT_FOUND", code, e)
		}
		if code := anon.do("GET", "/api/sessions", nil, &e, spoof...); code != 401 {
			t.Fatalf("no token, claiming to be alice: %d %+v; want 401", code, e)
		}
	})
	t.Run("WebSocket from a foreign origin", func(t *testing.T) {
		_, resp, err := alice.socket(ctxT(t, 30*time.Second), "https://evil.example")
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("dial from a foreign origin: %v %v; want 403", resp, err)
		}
	})
}

func containsSession(ss []struct {
	ID string `json:"id"`
}, id string) bool {
	for _, s := range ss {
		if s.ID == id {
			return true
		}
	}
	return false
}

// A browser connection that loads the app (no token) is not closed by the
// unauthenticated-connection timer while it is in use; an idle one is.
func TestWebConnectionOutlivesTheAuthTimer(t *testing.T) {
	const timeout = time.Second
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), extraArgs: []string{"--handshake-timeout", timeout.String()}})
	b := w.browser("")
	cfg := b.tls.Clone()
	cfg.NextProtos = []string{"http/1.1"}
	c, err := tls.Dial("tcp", w.addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	start := time.Now()
	n := 0
	for time.Since(start) < 3*timeout {
		if _, err := io.WriteString(c, "GET "+appPath+" HTTP/1.1\r\nHost: "+w.addr+"\r\n\r\n"); err != nil {
			t.Fatalf("request %d after %v: %v", n, time.Since(start), err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d after %v: the connection was closed: %v", n, time.Since(start), err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		n++
	}
	t.Logf("%d requests on one connection in %v", n, time.Since(start).Round(time.Millisecond))
	// Idle now: closed within the timeout (and a margin).
	c.SetReadDeadline(time.Now().Add(20 * timeout))
	if _, err := io.Copy(io.Discard, c); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("an idle unauthenticated connection was not closed")
		}
	}
}

// Web Push is served through the relay's web API once --push-subject is
// set: /api/info announces it with the VAPID key, /api/push needs a token.
func TestWebPushThroughRelay(t *testing.T) {
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), extraArgs: []string{"--push-subject", "mailto:ops@example.com"}})
	var info struct {
		Push           bool   `json:"push"`
		VAPIDPublicKey string `json:"vapidPublicKey"`
	}
	if code := w.browser("").do("GET", "/api/info", nil, &info); code != 200 || !info.Push || info.VAPIDPublicKey == "" {
		t.Fatalf("GET /api/info: %d %+v; want push on with a key", code, info)
	}
	var e apiError
	if code := w.browser("").do("GET", "/api/push", nil, &e); code != 401 {
		t.Fatalf("GET /api/push without a token: %d %+v; want 401", code, e)
	}
	var p struct {
		Enabled        bool              `json:"enabled"`
		VAPIDPublicKey string            `json:"vapidPublicKey"`
		Subscriptions  []json.RawMessage `json:"subscriptions"`
	}
	if code := w.browser(w.userToken("alice")).do("GET", "/api/push", nil, &p); code != 200 || !p.Enabled || p.VAPIDPublicKey != info.VAPIDPublicKey || len(p.Subscriptions) != 0 {
		t.Fatalf("alice's GET /api/push: %d %+v; want enabled, the same key, no subscriptions", code, p)
	}
}
