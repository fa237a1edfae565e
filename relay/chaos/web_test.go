package chaos

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// webEvery makes every webEvery-th client (idx % webEvery == 1) a web
// client: it follows its sessions over the relay's WebSocket (/api/ws), as
// the web app does, instead of gRPC ResumeSession streams. It still queues
// messages and answers prompts with gRPC calls.
const webEvery = 4

// isWeb reports whether client idx follows over the WebSocket.
func isWeb(idx int) bool { return idx%webEvery == 1 }

// countClients is how many of n clients are of the kind is says.
func countClients(n int, is func(int) bool) int {
	k := 0
	for i := range n {
		if is(i) {
			k++
		}
	}
	return k
}

// webDialer opens a client's WebSocket through the clients' link.
type webDialer struct {
	url    string
	client *http.Client
}

func newWebDialer(addr string, tlsCfg *tls.Config) *webDialer {
	// HTTP/1.1 (the upgrade), with the relay's CA.
	tr := &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: false}
	return &webDialer{url: "wss://" + addr + "/api/ws", client: &http.Client{Transport: tr}}
}

// transientCodes are the socket errors of a fault: the server closes the
// socket after them and the client opens a new one.
var transientCodes = map[string]bool{"TUNNEL_DISCONNECTED": true, "MACHINE_OFFLINE": true, "RELAY_DRAINING": true,
	"UNAVAILABLE": true, "SLOW_CONSUMER": true, "DEADLINE_EXCEEDED": true}

// wsMsg is the part of a WebSocket message the follower reads.
type wsMsg struct {
	Type       string `json:"type"`
	SessionID  string `json:"sessionId"`
	Seq        uint64 `json:"seq"`
	TS         string `json:"ts"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	RequestID  string `json:"requestId"`
	Cwd        string `json:"cwd"`
	StopReason string `json:"stopReason"`
	// RetryAfterMs is a subscription_ended's hint (the machine is moving).
	RetryAfterMs *int64 `json:"retryAfterMs"`
}

// streamed reports whether m is one of the session's streamed items (an
// AgentEvent), as opposed to replay_done, acks and the session list.
func (m *wsMsg) streamed() bool {
	return m.Seq > 0 && m.Type != "replay_done" && m.Type != "ack"
}

// runWeb is run for a web client: it keeps a WebSocket subscribed to the
// session, reconnecting after every close or error with a hello that
// resubscribes after the last sequence it received, as the web app does.
func (f *follower) runWeb(ctx context.Context) {
	// The web app's schedule (web/src/store.ts reconnectDelay), without
	// its jitter.
	f.follow(ctx, f.webSession, 100*time.Millisecond, 5*time.Second)
}

// hinted is a socket's end that the relay's error before it gave a retry
// hint for (retryAfterMs): the app reconnects after it.
type hinted struct {
	err   error
	after time.Duration
}

func (h *hinted) Error() string { return fmt.Sprintf("%v (retry in %s)", h.err, h.after) }
func (h *hinted) Unwrap() error { return h.err }

// webSession runs one WebSocket until it fails; streaming is called once
// the relay answered the hello.
func (f *follower) webSession(ctx context.Context, streaming func()) error {
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	conn, _, err := websocket.Dial(dctx, f.c.web.url, &websocket.DialOptions{HTTPClient: f.c.web.client})
	cancel()
	if err != nil {
		return fmt.Errorf("websocket: %w", err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(16 << 20)
	f.mu.Lock()
	from := f.last
	f.mu.Unlock()
	hello := map[string]any{"type": "hello", "token": f.c.token, "machine": f.machine.id,
		"subscriptions": []map[string]any{{"sessionId": f.session, "afterSequence": from}}}
	if err := wsjson.Write(ctx, conn, hello); err != nil {
		return fmt.Errorf("websocket hello: %w", err)
	}
	return f.webEvents(ctx, plainSocket{conn}, streaming)
}

// eventSocket is the web app's event stream: /api/ws itself, or its
// look-alike inside a paired browser's channel (web/1's ws frames).
type eventSocket interface {
	read(ctx context.Context) (wsMsg, error)
	write(ctx context.Context, v any) error
}

// plainSocket is /api/ws.
type plainSocket struct{ c *websocket.Conn }

func (s plainSocket) read(ctx context.Context) (wsMsg, error) {
	var m wsMsg
	err := wsjson.Read(ctx, s.c, &m)
	if err == nil {
		return m, nil
	}
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return m, fmt.Errorf("websocket closed %d: %s", ce.Code, ce.Reason)
	}
	return m, fmt.Errorf("websocket: %w", err)
}

func (s plainSocket) write(ctx context.Context, v any) error { return wsjson.Write(ctx, s.c, v) }

// webEvents reads the event socket until it fails, as the web app does:
// streaming once the snapshot came, resubscribing after a transient
// subscription end, recording the session's events.
func (f *follower) webEvents(ctx context.Context, sock eventSocket, streaming func()) error {
	resubs := 0     // transient subscription ends in a row
	var hint *int64 // the retryAfterMs of the socket's last error
	for {
		f.c.stallIfAsked(ctx)
		m, err := sock.read(ctx)
		if err != nil {
			if hint != nil {
				return &hinted{err: err, after: time.Duration(*hint) * time.Millisecond}
			}
			return err
		}
		switch {
		case m.Type == "snapshot":
			streaming()
			continue
		case m.Type == "subscription_ended" && m.SessionID == f.session:
			// Resubscribe from where it stopped, when the web app would
			// (web/src/store.ts resubscribeDelay): after the relay's
			// retryAfterMs, else 250 ms doubling.
			if !transientCodes[m.Code] {
				return fmt.Errorf("websocket: subscription ended: %s %s", m.Code, m.Message)
			}
			wait := time.Duration(250<<min(resubs, 5)) * time.Millisecond
			if m.RetryAfterMs != nil {
				wait = time.Duration(*m.RetryAfterMs) * time.Millisecond
			}
			resubs++
			if !sleepCtx(ctx, wait) {
				return ctx.Err()
			}
			f.mu.Lock()
			from := f.last
			f.mu.Unlock()
			if err := sock.write(ctx, map[string]any{"type": "subscribe", "sessionId": f.session, "afterSequence": from}); err != nil {
				return fmt.Errorf("websocket resubscribe after %s: %w", m.Code, err)
			}
			continue
		case m.Type == "replay_done" && m.SessionID == f.session:
			resubs = 0
			continue
		case m.Type == "error" && m.Seq == 0:
			hint = m.RetryAfterMs
			// The machine's tunnel or a replica going away is said so
			// before the socket closes (1012), and the break records it;
			// anything else is the client's error.
			if !transientCodes[m.Code] {
				f.c.rec.errorf("client %d (web): error on the socket: %s %s", f.c.idx, m.Code, m.Message)
			}
			continue
		case !m.streamed() || m.SessionID != f.session:
			continue
		}
		ts, _ := time.Parse(time.RFC3339Nano, m.TS)
		var wd, perm string
		if m.Type == "session_info" {
			wd = m.Cwd
		}
		if m.Type == "permission_request" {
			perm = m.RequestID
		}
		f.received(ctx, m.Seq, ts, wd, m.Type == "turn_complete", perm)
	}
}
