package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/relay/internal/pushtest"
	"github.com/betcode-dev/betcode/relay/pki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
	"github.com/betcode-dev/betcode/shared/fakeapi"
	"github.com/betcode-dev/betcode/shared/promtest"
)

// TestPushEncryptedByMachine: a paired device registers its push
// subscription with its machine (--relay-e2e=required) inside a web/1
// channel through the relay; a real permission request from the Claude CLI
// then reaches the fake push service as a message the test (the browser)
// decrypts with the subscription's keys. The relay's log and metrics never
// hold the prompt, the command or the subscription's keys, and the relay's
// own watcher is refused (one message, no double notification).
func TestPushEncryptedByMachine(t *testing.T) {
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), dbURL: pgtest.URL(t),
		extraArgs: []string{"--metrics-listen", "127.0.0.1:0", "--push-subject", "mailto:ops@example.com", "--push-private-endpoints"}})
	srv := pushtest.New(t)
	a := w.startE2EAgent("pushed")
	ca := filepath.Join(w.pki, pki.CACertFile)
	ctx := ctxT(t, 3*time.Minute)

	phone := newDevice(t, w)
	code, pairCmd, pairOut := pairCode(ctx, t, a)
	if out, err := phone.run(ctx, t, "", "pair", code, "--relay-ca", ca, "--name", "test phone"); err != nil {
		t.Fatalf("betcode pair: %v\n%s", err, out)
	}
	if err := pairCmd.Wait(); err != nil {
		t.Fatalf("betcode-agent pair: %v\n%s", err, pairOut.String())
	}
	// The browser subscribes with the push service and gives the
	// subscription to its machine inside its channel (web/1 frames), with
	// the device's key and relay token from `betcode pair`.
	sub := srv.Subscribe(t)
	status, body := webRequest(ctx, t, w, phone, "pushed", "POST", "/push/subscriptions",
		`{"endpoint":"`+sub.Endpoint+`","keys":{"p256dh":"`+sub.P256dh+`","auth":"`+sub.Auth+`"},"name":"phone","kinds":["permission_request"]}`)
	if status != 201 || !strings.Contains(body, `"endpointHost":"127.0.0.1`) {
		t.Fatalf("POST /push/subscriptions in the channel: %d %s", status, body)
	}

	// A real permission request: the fake model's Bash call (RUNTOOL),
	// which the device did not allow.
	prompt := "please RUNTOOL now " + marker("PUSH")
	command := fakeapi.ToolCommand
	chatCtx, stopChat := context.WithCancel(ctx)
	defer stopChat()
	chatDone := make(chan struct{})
	go func() {
		defer close(chatDone)
		_, _ = phone.run(chatCtx, t, "", "chat", "--cwd", a.project, prompt)
	}()
	msg := srv.Next(t, 90*time.Second)
	stopChat()
	<-chatDone
	var n struct {
		Type, MachineID, SessionID, RequestID, Title, Body, Tag, URL string
	}
	if err := json.Unmarshal(msg.Payload, &n); err != nil {
		t.Fatalf("payload %q: %v", msg.Payload, err)
	}
	if n.Type != "permission_request" || n.MachineID != "pushed" || n.Body != command || n.Title != "Bash wants to run" ||
		n.RequestID == "" || n.Tag != "pushed/"+n.SessionID+"/"+n.RequestID || msg.Urgency != "high" {
		t.Fatalf("notification %+v (urgency %q)", n, msg.Urgency)
	}

	// The relay's own watcher was refused: nothing else was posted.
	if !strings.Contains(w.relay.Log(), "serves the relay only end-to-end channels") {
		t.Error("the relay's watcher was not refused by the machine")
	}
	if got := srv.Posts(); got != 1 {
		t.Errorf("%d posts to the push service, want 1", got)
	}
	m := regexp.MustCompile(`relay metrics.* addr=(\S+)`).FindStringSubmatch(w.relay.Log())
	if m == nil {
		t.Fatal("the relay logged no metrics address")
	}
	// The relay counts the send once the push service answered, after
	// the test read the message.
	var metrics []byte
	if !eventually(10*time.Second, 50*time.Millisecond, func() bool {
		metrics = promtest.Scrape(t, "http://"+m[1]+"/metrics")
		v, ok := promtest.Value(metrics, "betcode_relay_push_sends_total", "kind", "relayed", "outcome", "sent")
		return ok && v == 1
	}) {
		t.Errorf("betcode_relay_push_sends_total{kind=relayed,outcome=sent} is not 1:\n%s", metrics)
	}
	for where, b := range map[string][]byte{"relay log": []byte(w.relay.Log()), "relay metrics": metrics} {
		if bytes.Contains(b, []byte(prompt)) || bytes.Contains(b, []byte(command)) || bytes.Contains(b, []byte(sub.Auth)) ||
			bytes.Contains(b, []byte(sub.P256dh)) {
			t.Errorf("the %s holds the notification's text or the subscription's keys", where)
		}
	}
}

// webRequest sends one web/1 request in a browser channel of device d to
// machine (docs/e2ee-wire.md §2), through the relay with the device's
// token, and returns the answer's status and body.
func webRequest(ctx context.Context, t *testing.T, w *world, d *device, machine, method, path, body string) (int, string) {
	t.Helper()
	var dir string
	for _, kv := range d.env {
		if v, ok := strings.CutPrefix(kv, "XDG_CONFIG_HOME="); ok {
			dir = filepath.Join(v, "betcode")
		}
	}
	key, err := e2ee.LoadOrCreateKey(filepath.Join(dir, "device.key"))
	if err != nil {
		t.Fatal(err)
	}
	var pairings struct {
		Machines []struct {
			MachineID  string `json:"machine_id"`
			MachineKey []byte `json:"machine_key"`
			Token      string `json:"token"`
		} `json:"machines"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "pairings.json"))
	if err != nil || json.Unmarshal(b, &pairings) != nil || len(pairings.Machines) != 1 || pairings.Machines[0].MachineID != machine {
		t.Fatalf("the device's pairings: %v", err)
	}
	p := pairings.Machines[0]
	stream, err := pb.NewChannelServiceClient(w.dial(w.addr, p.Token)).Open(onMachine(ctx, machine))
	if err != nil {
		t.Fatal(err)
	}
	hello, _ := json.Marshal(map[string]string{"name": "browser", "version": "e2e", "protocol": "web/1"})
	c, err := e2ee.Dial(ctx, openTransport{stream}, key, machine, p.MachineKey, hello)
	if err != nil {
		t.Fatalf("open a web/1 channel: %v", err)
	}
	defer c.Close()
	req, _ := json.Marshal(map[string]any{"t": "req", "id": 1, "method": method, "path": path, "body": body})
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(req))), req...)); err != nil {
		t.Fatal(err)
	}
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			t.Fatalf("read the answer: %v", err)
		}
		f := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(c, f); err != nil {
			t.Fatalf("read the answer: %v", err)
		}
		var res struct {
			T      string `json:"t"`
			ID     int    `json:"id"`
			Status int    `json:"status"`
			Body   string `json:"body"`
		}
		if err := json.Unmarshal(f, &res); err != nil {
			t.Fatal(err)
		}
		if res.T == "res" && res.ID == 1 {
			return res.Status, res.Body
		}
	}
}
