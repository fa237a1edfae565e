package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/shared/e2ee"
	"github.com/betcode-dev/betcode/shared/fakeapi"
	"github.com/betcode-dev/betcode/shared/mtls"
)

// wsTransport is an e2ee.Transport over the relay's /api/channel or
// /api/pair WebSocket, as a browser carries it (docs/e2ee-wire.md §1).
type wsTransport struct {
	c *websocket.Conn
}

func (t wsTransport) Send(b []byte) error {
	return t.c.Write(context.Background(), websocket.MessageBinary, b)
}

func (t wsTransport) Recv() ([]byte, error) {
	typ, b, err := t.c.Read(context.Background())
	if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
		return nil, io.EOF
	}
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageBinary {
		return nil, errors.New("a text message from the relay")
	}
	return b, nil
}

func (t wsTransport) Close() error { return t.c.CloseNow() }

// dialCarrier opens path on the relay's web port and sends the hello.
func (w *world) dialCarrier(ctx context.Context, t *testing.T, path, token, machine string) *websocket.Conn {
	t.Helper()
	cfg, err := mtls.ClientConfig(filepath.Join(w.pki, pki.CACertFile), "", "", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cfg.NextProtos = []string{"http/1.1"}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	c, _, err := websocket.Dial(ctx, "wss://"+w.addr+path, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	c.SetReadLimit(1 << 20)
	t.Cleanup(func() { c.CloseNow() })
	hello, _ := json.Marshal(map[string]string{"type": "hello", "token": token, "machine": machine})
	if err := c.Write(ctx, websocket.MessageText, hello); err != nil {
		t.Fatal(err)
	}
	return c
}

// closeOf reads until the socket closes and returns its close error.
func closeOf(ctx context.Context, c *websocket.Conn) websocket.CloseError {
	for {
		_, _, err := c.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			errors.As(err, &ce)
			return ce
		}
	}
}

// webFrames speaks web/1 on a channel's Conn.
type webFrames struct {
	t *testing.T
	c *e2ee.Conn
	// onFail, when set, adds what the test saw to a failed wait.
	onFail func() string
}

func (f *webFrames) send(m map[string]any) {
	f.t.Helper()
	j, _ := json.Marshal(m)
	if _, err := f.c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(j))), j...)); err != nil {
		f.t.Fatal(err)
	}
}

func (f *webFrames) next(typ string) map[string]any {
	f.t.Helper()
	m, err := f.poll(typ)
	if err != nil {
		more := ""
		if f.onFail != nil {
			more = "\n" + f.onFail()
		}
		f.t.Fatalf("waiting for a %s frame: %v%s", typ, err, more)
	}
	return m
}

// poll reads frames until one of type typ, or the connection's error
// (its read deadline).
func (f *webFrames) poll(typ string) (map[string]any, error) {
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(f.c, hdr[:]); err != nil {
			return nil, err
		}
		b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(f.c, b); err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("a frame that is not JSON: %w", err)
		}
		if m["t"] == typ {
			return m, nil
		}
		if m["t"] == "ws.close" {
			return nil, fmt.Errorf("the event socket closed (code %v, reason %q) while waiting for a %s frame", m["code"], m["reason"], typ)
		}
	}
}

func (f *webFrames) request(id int, method, path, body string) (int, string) {
	f.t.Helper()
	m := map[string]any{"t": "req", "id": id, "method": method, "path": path}
	if body != "" {
		m["body"] = body
	}
	f.send(m)
	for {
		res := f.next("res")
		if res["id"] == float64(id) {
			b, _ := res["body"].(string)
			return int(res["status"].(float64)), b
		}
	}
}

// TestWebChannelThroughRelay is a browser's end-to-end channel in Go: it
// pairs through the relay's /api/pair with the code's ticket, opens
// /api/channel with the device token it got, and drives the machine's web
// API inside (web/1 frames): the session list, a new session, its events on
// the event socket. The machine serves relayed calls only inside channels.
func TestWebChannelThroughRelay(t *testing.T) {
	w := newWorld(t, pgtest.URL(t))
	a := w.startE2EAgent("webch")
	ctx := ctxT(t, 3*time.Minute)

	code, pairCmd, pairOut := pairCode(ctx, t, a)
	pc, err := e2ee.ParsePairingCode(code)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := e2ee.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pairWS := w.dialCarrier(ctx, t, "/api/pair", pc.Ticket, pc.MachineID)
	pconn, err := e2ee.PairDevice(ctx, wsTransport{pairWS}, dev, pc, []byte(`{"name":"ws browser"}`))
	if err != nil {
		t.Fatalf("pairing through /api/pair: %v", err)
	}
	wb, err := pconn.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var welcome struct {
		Token, Error string
	}
	if err := json.Unmarshal(wb, &welcome); err != nil || welcome.Token == "" {
		t.Fatalf("welcome %s: %v", wb, err)
	}
	machineKey := pconn.PeerStatic()
	if err := pconn.WriteMessage([]byte("stored")); err != nil {
		t.Fatal(err)
	}
	if err := pairCmd.Wait(); err != nil || !strings.Contains(pairOut.String(), "paired: ws browser") {
		t.Fatalf("betcode-agent pair: %v\n%s", err, pairOut.String())
	}
	pconn.Close()

	hello := []byte(`{"name":"ws browser","version":"e2e","protocol":"web/1"}`)
	chWS := w.dialCarrier(ctx, t, "/api/channel", welcome.Token, pc.MachineID)
	conn, err := e2ee.Dial(ctx, wsTransport{chWS}, dev, pc.MachineID, machineKey, hello)
	if err != nil {
		t.Fatalf("channel through /api/channel: %v", err)
	}
	defer conn.Close()
	f := &webFrames{t: t, c: conn}

	if st, body := f.request(1, "GET", "/sessions", ""); st != 200 || !strings.HasPrefix(body, "[") {
		t.Fatalf("GET /sessions in the channel: %d %s", st, body)
	}
	if st, body := f.request(2, "GET", "/machines", ""); st != 404 {
		t.Fatalf("GET /machines in the channel: %d %s", st, body)
	}
	reply := marker("WEBREPLY")
	w.api.Enqueue(fakeapi.Reply{Text: reply})
	start, _ := json.Marshal(map[string]string{"cwd": a.project, "prompt": "hello from the web channel"})
	st, body := f.request(3, "POST", "/sessions", string(start))
	var sess struct {
		ID string `json:"id"`
	}
	if (st != 200 && st != 201) || json.Unmarshal([]byte(body), &sess) != nil || sess.ID == "" {
		t.Fatalf("POST /sessions in the channel: %d %s", st, body)
	}
	f.send(map[string]any{"t": "ws.open", "subscriptions": []map[string]any{{"sessionId": sess.ID, "afterSequence": 0}}})
	// The turn's reply streams on the event socket; a channel that goes
	// quiet, or an event socket that closes, fails the test with what it
	// carried instead of hanging it.
	var seen []string
	f.onFail = func() string { return "events so far:\n" + strings.Join(seen, "\n") + "\nagent log:\n" + a.proc.Log() }
	conn.SetReadDeadline(time.Now().Add(90 * time.Second))
	for {
		m, err := f.poll("ws")
		if err != nil {
			t.Fatalf("waiting for the streamed reply: %v\n%s", err, f.onFail())
		}
		data, _ := m["data"].(string)
		seen = append(seen, data)
		if strings.Contains(data, reply) {
			break
		}
	}
	f.onFail = nil
	conn.SetReadDeadline(time.Time{})
	f.send(map[string]any{"t": "ws.close"})
	if m := f.next("ws.close"); m["code"] != float64(1000) {
		t.Fatalf("ws.close %v", m)
	}

	t.Run("a wrong token", func(t *testing.T) {
		c := w.dialCarrier(ctx, t, "/api/channel", "bct_wrong", pc.MachineID)
		if ce := closeOf(ctx, c); ce.Code != 4401 {
			t.Fatalf("close %d %q, want 4401", ce.Code, ce.Reason)
		}
	})
	t.Run("the device token for another machine", func(t *testing.T) {
		// Another machine of the same owner, online: the token's scope
		// refuses it, as if it did not exist (MACHINE_NOT_FOUND, as for
		// the CLI's calls: the relay does not tell a device which other
		// machines there are).
		w.startAgent("webch-other", w.addr)
		c := w.dialCarrier(ctx, t, "/api/channel", welcome.Token, "webch-other")
		if ce := closeOf(ctx, c); ce.Code != 4404 || !strings.HasPrefix(ce.Reason, "MACHINE_NOT_FOUND: ") {
			t.Fatalf("close %d %q, want 4404 MACHINE_NOT_FOUND", ce.Code, ce.Reason)
		}
	})
	t.Run("an unpaired key", func(t *testing.T) {
		stranger, _ := e2ee.GenerateKey()
		c := w.dialCarrier(ctx, t, "/api/channel", welcome.Token, pc.MachineID)
		_, err := e2ee.Dial(ctx, wsTransport{c}, stranger, pc.MachineID, machineKey, hello)
		var refused *e2ee.RefusedError
		if !errors.As(err, &refused) || !strings.Contains(refused.Reason, "not paired") {
			t.Fatalf("an unpaired key's channel: %v", err)
		}
	})
	t.Run("text after the hello", func(t *testing.T) {
		c := w.dialCarrier(ctx, t, "/api/channel", welcome.Token, pc.MachineID)
		if err := c.Write(ctx, websocket.MessageText, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if ce := closeOf(ctx, c); ce.Code != websocket.StatusProtocolError {
			t.Fatalf("close %d %q, want 1002", ce.Code, ce.Reason)
		}
	})
}
