package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/localtoken"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// The web API (shared/webapi) on the agent's own --http-listen, over real
// HTTP and a real WebSocket, with the real CLI on the fake model API.

// webAgent starts an agent with the web app on a free loopback port and
// returns it with the web server's base URL and the local token.
func webAgent(t *testing.T) (*testenv.Agent, string, string) {
	t.Helper()
	fake := testenv.FakeAPI(t)
	a := testenv.StartAgent(t, testenv.AgentOptions{APIURL: fake.URL(), Args: []string{"--http-listen", "127.0.0.1:0"}})
	if err := a.WaitLog("web app serving", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+)/`).FindStringSubmatch(a.Log())
	if m == nil {
		t.Fatalf("no web URL in the agent's log:\n%s", a.Log())
	}
	tok, err := localtoken.Read(a.Opts.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	return a, m[1], tok
}

// webCall makes one REST call and decodes the JSON answer into out (when
// not nil); it returns the status.
func webCall(t *testing.T, ctx context.Context, method, url, token string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, url, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

type wsMsg = map[string]any

// wsConn is a test's WebSocket with the messages it read.
type wsConn struct {
	t   *testing.T
	c   *websocket.Conn
	ctx context.Context
}

func dialWS(t *testing.T, ctx context.Context, base, origin string) (*wsConn, *http.Response, error) {
	t.Helper()
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	c, resp, err := websocket.Dial(ctx, "ws"+base[len("http"):]+"/api/ws", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		return nil, resp, err
	}
	c.SetReadLimit(32 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &wsConn{t: t, c: c, ctx: ctx}, resp, nil
}

func (w *wsConn) send(m wsMsg) {
	w.t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		w.t.Fatal(err)
	}
	w.sendRaw(b)
}

func (w *wsConn) sendRaw(b []byte) {
	w.t.Helper()
	if err := w.c.Write(w.ctx, websocket.MessageText, b); err != nil {
		w.t.Fatal(err)
	}
}

func (w *wsConn) read() wsMsg {
	w.t.Helper()
	_, b, err := w.c.Read(w.ctx)
	if err != nil {
		w.t.Fatalf("read WebSocket: %v", err)
	}
	var m wsMsg
	if err := json.Unmarshal(b, &m); err != nil {
		w.t.Fatalf("WebSocket message %q: %v", b, err)
	}
	return m
}

// until reads messages until pred is true for one (inclusive).
func (w *wsConn) until(pred func(wsMsg) bool) []wsMsg {
	w.t.Helper()
	var out []wsMsg
	for {
		m := w.read()
		out = append(out, m)
		if pred(m) {
			return out
		}
	}
}

func isType(typ string) func(wsMsg) bool {
	return func(m wsMsg) bool { return m["type"] == typ }
}

func isAck(id string) func(wsMsg) bool {
	return func(m wsMsg) bool { return m["type"] == "ack" && m["id"] == id }
}

// streamed is the session items among msgs (those with a seq), keyed by seq.
func streamed(t *testing.T, sessionID string, msgs []wsMsg) []wsMsg {
	t.Helper()
	var out []wsMsg
	for _, m := range msgs {
		if seq, ok := m["seq"].(float64); ok && m["sessionId"] == sessionID && m["type"] != "replay_done" && seq > 0 {
			out = append(out, m)
		}
	}
	return out
}

func seqOf(m wsMsg) uint64 { return uint64(m["seq"].(float64)) }

// checkContiguous asserts msgs carry from+1, from+2, ... with no gap.
func checkContiguous(t *testing.T, msgs []wsMsg, from uint64) {
	t.Helper()
	for i, m := range msgs {
		if want := from + uint64(i) + 1; seqOf(m) != want {
			t.Fatalf("message %d has seq %d, want %d (%v)", i, seqOf(m), want, m)
		}
	}
}

func TestWebAPI(t *testing.T) {
	a, base, tok := webAgent(t)
	ctx := ctxT(t)
	api := base + "/api"

	t.Run("health", func(t *testing.T) {
		var h map[string]string
		if st := webCall(t, ctx, "GET", api+"/health", "", nil, &h); st != 200 || h["status"] != "ok" || h["role"] != "agent" {
			t.Fatalf("health = %d %v", st, h)
		}
		resp, err := http.Get(api + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("security headers missing: %v", resp.Header)
		}
		// The web app, and its routes (SPA fallback).
		for _, p := range []string{"/", "/some/app/route"} {
			resp, err := http.Get(base + p)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" || resp.Header.Get("Cache-Control") != "no-cache" {
				t.Errorf("GET %s = %d %v", p, resp.StatusCode, resp.Header)
			}
		}
	})

	t.Run("unauthenticated", func(t *testing.T) {
		for _, token := range []string{"", "bct_wrong"} {
			var e map[string]string
			if st := webCall(t, ctx, "GET", api+"/sessions", token, nil, &e); st != 401 || e["code"] != "UNAUTHENTICATED" {
				t.Errorf("token %q: GET /api/sessions = %d %v, want 401 UNAUTHENTICATED", token, st, e)
			}
		}
	})

	t.Run("dirs", func(t *testing.T) {
		dir := a.ProjectDir(t)
		if err := os.Mkdir(filepath.Join(dir, "alpha"), 0o755); err != nil {
			t.Fatal(err)
		}
		var out struct {
			Path        string   `json:"path"`
			Directories []string `json:"directories"`
		}
		if st := webCall(t, ctx, "GET", api+"/dirs?path="+dir, tok, nil, &out); st != 200 || !slices.Contains(out.Directories, filepath.Join(dir, "alpha")) {
			t.Fatalf("dirs = %d %+v", st, out)
		}
		var v map[string]any
		if st := webCall(t, ctx, "GET", api+"/dirs/validate?path="+dir, tok, nil, &v); st != 200 || v["valid"] != true {
			t.Fatalf("validate = %d %v", st, v)
		}
	})

	t.Run("origin mismatch", func(t *testing.T) {
		_, resp, err := dialWS(t, ctx, base, "http://evil.example")
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("dial with a foreign Origin: %v, response %v; want 403", err, resp)
		}
	})

	t.Run("bad token", func(t *testing.T) {
		ws, _, err := dialWS(t, ctx, base, base)
		if err != nil {
			t.Fatal(err)
		}
		ws.send(wsMsg{"type": "hello", "token": "bct_wrong"})
		if m := ws.read(); m["type"] != "error" || m["code"] != "UNAUTHENTICATED" {
			t.Fatalf("got %v, want error UNAUTHENTICATED", m)
		}
		_, _, err = ws.c.Read(ctx)
		if websocket.CloseStatus(err) != 4401 {
			t.Fatalf("close = %v, want 4401", err)
		}
	})

	cwd := a.ProjectDir(t)
	ws, _, err := dialWS(t, ctx, base, base)
	if err != nil {
		t.Fatal(err)
	}
	ws.send(wsMsg{"type": "hello", "token": tok})
	if m := ws.read(); m["type"] != "snapshot" {
		t.Fatalf("first message %v, want snapshot", m)
	}

	var sess struct {
		ID  string `json:"id"`
		Cwd string `json:"cwd"`
	}
	if st := webCall(t, ctx, "POST", api+"/sessions", tok, map[string]any{"cwd": cwd, "prompt": "say hello", "name": "web e2e"}, &sess); st != 201 || sess.ID == "" {
		t.Fatalf("create session = %d %+v", st, sess)
	}
	var seen []wsMsg // every streamed item of the session, in order
	t.Run("lead output", func(t *testing.T) {
		ws.send(wsMsg{"type": "subscribe", "id": "sub1", "sessionId": sess.ID, "afterSequence": 0})
		msgs := ws.until(isType("turn_complete"))
		var text string
		var last uint64
		for _, m := range streamed(t, sess.ID, msgs) {
			if seqOf(m) <= last {
				t.Fatalf("seq %d after %d: %v", seqOf(m), last, m)
			}
			last = seqOf(m)
			if m["type"] == "lead_output" {
				text += m["text"].(string)
			}
		}
		if text != fakeapi.HelloText {
			t.Fatalf("lead_output text = %q, want %q", text, fakeapi.HelloText)
		}
		if !slices.ContainsFunc(msgs, func(m wsMsg) bool { return m["type"] == "user_message" && m["text"] == "say hello" }) {
			t.Errorf("the prompt did not come back as a user_message: %v", msgs)
		}
		if !slices.ContainsFunc(msgs, isAck("sub1")) || !slices.ContainsFunc(msgs, isType("replay_done")) {
			t.Fatalf("no ack or replay_done among %v", msgs)
		}
		seen = append(seen, streamed(t, sess.ID, msgs)...)
		checkContiguous(t, seen, 0)
	})

	t.Run("malformed message", func(t *testing.T) {
		ws.sendRaw([]byte("{not json"))
		m := ws.until(func(m wsMsg) bool { return m["type"] == "error" && m["seq"] == nil })
		if last := m[len(m)-1]; last["code"] != "INVALID_ARGUMENT" {
			t.Fatalf("error = %v", last)
		}
		seen = append(seen, streamed(t, sess.ID, m)...)
		ws.send(wsMsg{"type": "ping", "id": "p1"})
		msgs := ws.until(func(m wsMsg) bool { return m["type"] == "pong" && m["id"] == "p1" })
		seen = append(seen, streamed(t, sess.ID, msgs)...)
	})

	t.Run("permission answered over REST", func(t *testing.T) {
		var q map[string]any
		if st := webCall(t, ctx, "POST", api+"/sessions/"+sess.ID+"/messages", tok, map[string]any{"prompt": runTool}, &q); st != 202 {
			t.Fatalf("message = %d %v", st, q)
		}
		msgs := ws.until(isType("permission_request"))
		pr := msgs[len(msgs)-1]
		if pr["toolName"] != "Bash" || pr["requestId"] == "" {
			t.Fatalf("permission_request = %v", pr)
		}
		seen = append(seen, streamed(t, sess.ID, msgs)...)
		var got map[string]any
		path := api + "/sessions/" + sess.ID + "/permissions/" + pr["requestId"].(string)
		if st := webCall(t, ctx, "POST", path, tok, map[string]any{"behavior": "allow"}, &got); st != 200 {
			t.Fatalf("answer = %d %v", st, got)
		}
		msgs = ws.until(isType("turn_complete"))
		seen = append(seen, streamed(t, sess.ID, msgs)...)
		checkContiguous(t, seen, 0)
		if !toolFileExists(t, cwd) {
			t.Fatal("the allowed tool did not create its file")
		}
		var e map[string]string
		if st := webCall(t, ctx, "POST", path, tok, map[string]any{"behavior": "allow"}, &e); st != 409 || e["code"] != "PERMISSION_NOT_PENDING" {
			t.Fatalf("second answer = %d %v, want 409 PERMISSION_NOT_PENDING", st, e)
		}
	})

	t.Run("reconnect gets exactly the missing events", func(t *testing.T) {
		ws.c.Close(websocket.StatusNormalClosure, "")
		mid := seqOf(seen[len(seen)/2])
		ws2, _, err := dialWS(t, ctx, base, base)
		if err != nil {
			t.Fatal(err)
		}
		ws2.send(wsMsg{"type": "hello", "token": tok, "subscriptions": []wsMsg{{"sessionId": sess.ID, "afterSequence": mid}}})
		msgs := ws2.until(func(m wsMsg) bool { return m["type"] == "replay_done" && m["sessionId"] == sess.ID })
		done := seqOf(msgs[len(msgs)-1])
		got := streamed(t, sess.ID, msgs)
		// No gap, no duplicate, up to replay_done's seq, and the same
		// events the first socket saw.
		checkContiguous(t, got, mid)
		if len(got) == 0 || seqOf(got[len(got)-1]) != done || done < seqOf(seen[len(seen)-1]) {
			t.Fatalf("replayed %d events after %d up to replay_done %d; the first socket saw up to %d", len(got), mid, done, seqOf(seen[len(seen)-1]))
		}
		for i, m := range seen[len(seen)/2+1:] {
			if got[i]["type"] != m["type"] || got[i]["ts"] != m["ts"] {
				t.Fatalf("replayed event %d is %v, want %v", i, got[i], m)
			}
		}
		var evs []wsMsg
		if st := webCall(t, ctx, "GET", fmt.Sprintf("%s/sessions/%s/events?after=%d", api, sess.ID, mid), tok, nil, &evs); st != 200 || len(evs) != len(got) {
			t.Fatalf("GET events after %d = %d, %d events, want %d", mid, st, len(evs), len(got))
		}
	})

	t.Run("sessions list", func(t *testing.T) {
		var list []map[string]any
		if st := webCall(t, ctx, "GET", api+"/sessions", tok, nil, &list); st != 200 || len(list) != 1 || list[0]["id"] != sess.ID || list[0]["name"] != "web e2e" {
			t.Fatalf("sessions = %d %v", st, list)
		}
	})
}
