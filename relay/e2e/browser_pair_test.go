package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/shared/browsertest"
	"github.com/betcode-dev/betcode/shared/e2ee"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// pairResult is what web/e2e/pair.mjs reports.
type pairResult struct {
	Steps    []string `json:"steps"`
	Home     string   `json:"home"`
	PairMs   int      `json:"pairMs"`
	Badge    string   `json:"badge"`
	Machines struct {
		Paired      int    `json:"paired"`
		Text        string `json:"text"`
		Fingerprint string `json:"fingerprint"`
	} `json:"machines"`
	PromptText   string `json:"promptText"`
	Notification *struct {
		Title   string   `json:"title"`
		Actions []string `json:"actions"`
	} `json:"notification"`
	ReusedCodeError     string   `json:"reusedCodeError"`
	AnsweredFrom        string   `json:"answeredFrom"`
	NotificationFailure string   `json:"notificationFailure"`
	Replies             []string `json:"replies"`
	ToolCards           int      `json:"toolCards"`
	pageTraffic
}

// TestBrowserPairThroughRelay is the phone of issue 22 in a real browser:
// the machine (an agent on --relay-e2e=required, so the relay can carry
// nothing else) prints a pairing code; chromium's fake camera shows its QR
// code to the app, which pairs with no relay login; then a session whose
// tool asks permission, answered from the notification's Allow action (a
// sealed envelope from the service worker), all end to end. What reached
// the relay in clear is only what it must see: the app, /api/info, the
// channel and pairing WebSockets and sealed envelopes.
func TestBrowserPairThroughRelay(t *testing.T) {
	browsertest.Require(t)
	w := newWorld(t, "")
	a := w.startE2EAgent("phone-m")
	ctx := ctxT(t, 4*time.Minute)

	code, pairCmd, pairOut := pairCode(ctx, t, a)
	pc, err := e2ee.ParsePairingCode(code)
	if err != nil {
		t.Fatalf("the machine's pairing code: %v", err)
	}
	const device = "Test phone (chromium)"
	want := fakeapi.ToolResultPrefix + "done"
	out := browsertest.Run(t, browsertest.Options{
		Script: "pair.mjs", BaseURL: w.webURL(), ChromiumArgs: w.trustRelay(), Timeout: 3 * time.Minute,
		Params: map[string]any{
			"code": code, "machineId": pc.MachineID, "deviceName": device, "cwd": a.project,
			"prompt": "please RUNTOOL now", "want": want,
		},
	})
	var r pairResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	t.Logf("pair.mjs: home %s, paired in %d ms, badge %q, answered from the %s%s; /api requests %q; WebSockets %q",
		r.Home, r.PairMs, r.Badge, r.AnsweredFrom, map[bool]string{true: " (the notification failed: " + r.NotificationFailure + ")"}[r.NotificationFailure != ""],
		r.APIRequests, r.WebSockets)

	if err := pairCmd.Wait(); err != nil || !strings.Contains(pairOut.String(), "paired: "+device) {
		t.Errorf("betcode-agent pair: %v\n%s", err, pairOut.String())
	}
	if wantSteps := []string{"paired", "machines", "prompt", "answered", "reload", "reused"}; !slices.Equal(r.Steps, wantSteps) {
		t.Errorf("steps %q, want %q", r.Steps, wantSteps)
	}
	if r.Home != "#/pair" {
		t.Errorf("the relay's home with nothing paired is %q, want #/pair", r.Home)
	}
	if !strings.Contains(r.Badge, "end-to-end encrypted") || !strings.Contains(r.Badge, pc.Fingerprint[:19]) {
		t.Errorf("the sessions screen shows %q, want end-to-end encrypted and the key %q…", r.Badge, pc.Fingerprint[:19])
	}
	if r.Machines.Paired != 1 || r.Machines.Fingerprint != pc.Fingerprint || !strings.Contains(r.Machines.Text, "name-phone-m") {
		t.Errorf("Machines shows %d paired (%q), fingerprint %q, want 1, name-phone-m, %q", r.Machines.Paired, r.Machines.Text, r.Machines.Fingerprint, pc.Fingerprint)
	}
	if !strings.Contains(r.PromptText, "Bash") || !strings.Contains(r.PromptText, "created-by-tool.txt") {
		t.Errorf("the permission prompt shows %q", r.PromptText)
	}
	if r.Notification == nil || !slices.Equal(r.Notification.Actions, []string{"allow", "deny"}) {
		t.Errorf("the notification: %+v, want Allow and Deny actions", r.Notification)
	}
	if len(r.Replies) == 0 || r.Replies[len(r.Replies)-1] != want {
		t.Errorf("replies %q, want the last %q", r.Replies, want)
	}
	if _, err := os.Stat(filepath.Join(a.project, fakeapi.ToolFile)); err != nil {
		t.Errorf("the allowed tool's file is not on the machine: %v", err)
	}
	if r.AnsweredFrom != "notification" {
		// POST /api/sealed and the machine's sealed permission answers land apart from the app:
		// until both are in, the page answers, and this says so.
		t.Logf("the notification's Allow did not answer (%s): the page did", r.NotificationFailure)
	}
	t.Logf("the used code again: %q", r.ReusedCodeError)
	if !strings.Contains(r.ReusedCodeError, "betcode-agent pair") {
		t.Errorf("pairing with a used code shows %q, want why and what to do (a new code from betcode-agent pair)", r.ReusedCodeError)
	}
	for _, a := range r.Alerts {
		if strings.HasSuffix(a.URL, "#/pair") && strings.Contains(a.Text, "betcode-agent pair") {
			continue // the used code's error, expected
		}
		t.Errorf("the app showed an error: %q (at %s)", a.Text, a.URL)
	}

	// Nothing of the machine went to the relay in clear: no REST call of the web API but the
	// relay's own (/api/info) and sealed envelopes, and no WebSocket but the channel's and the
	// pairing's.
	for _, req := range r.APIRequests {
		path := strings.Fields(req)[1]
		if path != "/api/info" && path != "/api/sealed" && path != "/api/push" {
			t.Errorf("a request reached the relay outside the channel: %s", req)
		}
	}
	for _, ws := range r.WebSockets {
		if ws != "/api/channel" && ws != "/api/pair" {
			t.Errorf("a WebSocket to %s: only /api/channel and /api/pair may carry the machine's calls", ws)
		}
	}
	if !slices.Contains(r.WebSockets, "/api/pair") || !slices.Contains(r.WebSockets, "/api/channel") {
		t.Errorf("WebSockets %q: want /api/pair and /api/channel", r.WebSockets)
	}
}
