package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/browsertest"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// shareResult is what web/e2e/share.mjs reports.
type shareResult struct {
	Steps             []string    `json:"steps"`
	OwnerShares       []string    `json:"ownerShares"`
	CarolError        string      `json:"carolError"`
	ReadURL           string      `json:"readURL"`
	ReadBanner        string      `json:"readBanner"`
	ReadPrompt        string      `json:"readPrompt"`
	ReadAnswerButtons int         `json:"readAnswerButtons"`
	ReadMessageBox    int         `json:"readMessageBox"`
	AnswerMessageBox  int         `json:"answerMessageBox"`
	CutMs             int         `json:"cutMs"`
	AfterCut          string      `json:"afterCut"`
	Alerts            []pageAlert `json:"alerts"`
}

// TestBrowserShareThroughRelay is a session shared with a teammate, in the
// owner's and the teammate's browsers: alice's browser, paired with her
// machine (--relay-e2e=required), makes two share codes for bob in a
// session's Share panel while its tool waits for permission; carol cannot
// use bob's code; bob's browser, logged in as bob, pairs with the read-only
// code and sees the session's stream and prompt with no answer buttons nor
// message box, then with the answer code answers it (the tool runs);
// alice's Stop sharing closes bob's channel within a second.
func TestBrowserShareThroughRelay(t *testing.T) {
	browsertest.Require(t)
	w := newWorld(t, "")
	a := w.startE2EAgent("share-m")
	ctx := ctxT(t, 4*time.Minute)
	bob, carol := w.token("bob"), w.token("carol")

	local, err := grpc.NewClient("unix://"+a.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	api := pb.NewAgentServiceClient(local)
	st, err := api.StartSession(ctx, &pb.StartSessionRequest{WorkingDirectory: a.project, Name: "shared with bob",
		Message: &pb.UserMessage{Content: "please RUNTOOL now"}})
	if err != nil {
		t.Fatal(err)
	}
	sid := st.Session.Id
	if _, _, err := followSession(t, ctx, api, sid).next(ctx, 0, func(ev *pb.AgentEvent) bool { return ev.GetPermissionRequest() != nil }); err != nil {
		t.Fatalf("the shared session's permission prompt: %v", err)
	}
	pairCode, pairCmd, pairOut := pairCode(ctx, t, a)
	want := fakeapi.ToolResultPrefix + "done"

	out := browsertest.Run(t, browsertest.Options{
		Script: "share.mjs", BaseURL: w.webURL(), ChromiumArgs: w.trustRelay(), Timeout: 3 * time.Minute,
		// BETCODE_SCREENSHOTS_DIR (make screenshots): the share panel and a shared session for docs/screenshots.
		Params: map[string]any{"outDir": os.Getenv("BETCODE_SCREENSHOTS_DIR"), "pairCode": pairCode, "machineId": "share-m", "sessionId": sid, "bobToken": bob, "carolToken": carol,
			"want": want},
	})
	if err := pairCmd.Wait(); err != nil {
		t.Errorf("betcode-agent pair for the owner's browser: %v\n%s", err, pairOut.String())
	}
	var r shareResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	t.Logf("share.mjs: carol %q; read-only banner %q at %s; unshare closed bob's channel in %d ms", r.CarolError, r.ReadBanner, r.ReadURL, r.CutMs)
	if want := []string{"codes made", "third user refused", "read-only", "answered", "cut"}; !slices.Equal(r.Steps, want) {
		t.Errorf("steps %q, want %q", r.Steps, want)
	}
	if r.CarolError == "" || !strings.Contains(r.CarolError, "no machine") && !strings.Contains(r.CarolError, "running and connected") {
		t.Errorf("carol pasting bob's code shows %q, want the relay's refusal", r.CarolError)
	}
	if r.ReadURL != "#/m/share-m/s/"+sid {
		t.Errorf("after pairing with the share code the app is at %s, want the shared session", r.ReadURL)
	}
	if !strings.Contains(r.ReadBanner, "read-only") {
		t.Errorf("the read-only share's banner says %q", r.ReadBanner)
	}
	if !strings.Contains(r.ReadPrompt, "Bash") || !strings.Contains(r.ReadPrompt, "shared with you read-only") {
		t.Errorf("the read-only teammate's prompt shows %q", r.ReadPrompt)
	}
	if r.ReadAnswerButtons != 0 || r.ReadMessageBox != 0 || r.AnswerMessageBox != 0 {
		t.Errorf("answer buttons %d and message box %d (read-only), message box %d (answer mode): want none",
			r.ReadAnswerButtons, r.ReadMessageBox, r.AnswerMessageBox)
	}
	if _, err := os.Stat(filepath.Join(a.project, fakeapi.ToolFile)); err != nil {
		t.Errorf("the tool bob allowed did not run: %v", err)
	}
	if r.CutMs < 0 || r.CutMs > 1000 {
		t.Errorf("stopping the share closed bob's channel after %d ms, want <= 1000", r.CutMs)
	}
	if !strings.Contains(r.AfterCut, "share") || !strings.Contains(r.AfterCut, "ended") {
		t.Errorf("after the share was stopped bob's app says %q, want that the share ended", r.AfterCut)
	}
	if len(r.OwnerShares) != 2 || !strings.Contains(strings.Join(r.OwnerShares, "|"), "can answer") {
		t.Errorf("the owner's Share panel lists %q, want bob's two shares", r.OwnerShares)
	}
	for _, al := range r.Alerts {
		t.Logf("the app showed: %q (at %s)", al.Text, al.URL)
	}
}
