package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/relay/internal/pushtest"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/shared/fakeapi"
	"github.com/betcode-dev/betcode/shared/promtest"
)

// TestPushEncryptedByMachine: a machine on --relay-e2e=required notifies
// its paired device of a permission request itself: the relay delivers a
// message the test (the browser) decrypts with the subscription's keys,
// while the relay's log and metrics never hold the prompt, the command or
// the subscription's keys, and
// the relay's own watcher is refused (no double notification).
//
// The device's subscription is written into the machine's store while it
// is stopped, as POST /push/subscriptions inside its channel would (the
// browser's channel client is tested apart).
func TestPushEncryptedByMachine(t *testing.T) {
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), dbURL: pgtest.URL(t),
		extraArgs: []string{"--metrics-listen", "127.0.0.1:0", "--push-subject", "mailto:ops@example.com", "--push-private-endpoints"}})
	srv := pushtest.New(t)
	a := w.newAgent("pushed")
	a.args = []string{"--relay-e2e", "required"}
	cert, key := w.machineCert("pushed")
	a.start(w, cert, key)
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
	var devices []struct {
		ID string `json:"id"`
	}
	b, err := os.ReadFile(filepath.Join(a.data, "paired-devices.json"))
	if err != nil || json.Unmarshal(b, &devices) != nil || len(devices) != 1 {
		t.Fatalf("paired devices: %v\n%s", err, b)
	}

	// The browser subscribes with the push service and gives the
	// subscription to its machine.
	sub := srv.Subscribe(t)
	a.proc.kill()
	subs, _ := json.Marshal([]map[string]any{{"id": "s1", "device_id": devices[0].ID, "endpoint": sub.Endpoint,
		"p256dh": sub.P256dh, "auth": sub.Auth, "kinds": []string{"permission_request"}, "created_at": time.Now().UTC()}})
	if err := os.WriteFile(filepath.Join(a.data, "push-subscriptions.json"), subs, 0o600); err != nil {
		t.Fatal(err)
	}
	a.start(w, cert, key)

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
