package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/localtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/browsertest"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// The web app in a real browser (Debian's chromium driven by playwright-core,
// web/e2e/flow.mjs) against the agent's own web server (betcode-agent serve
// --http-listen) with the real Claude CLI on the fake model API. The relay's
// side, with the whole flow and the measurements, is relay/e2e/browser_test.go;
// this is the same flow, shorter.

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestBrowserFlowThroughAgent runs the web app's main flow on a phone
// against the agent's own web server: log in with the local token, start a
// session and see the reply, approve a permission prompt (the file is on
// disk), a second tab, a markdown reply, a reload mid-stream that renders the
// scripted reply exactly, and the changes view; axe-core checks every screen
// on the way.
func TestBrowserFlowThroughAgent(t *testing.T) {
	browsertest.Require(t)
	fake := testenv.FakeAPI(t)
	addr := freeAddr(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: fake.URL(), Args: []string{"--http-listen", addr}})
	tok, err := localtoken.Read(agent.Opts.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	cwd := agent.ProjectDir(t)
	startReply := "Hello from the agent, streamed word by word to a phone."
	reload := fakeapi.Reply{Deltas: make([]string, 200), Delay: 15 * time.Millisecond}
	for i := range reload.Deltas {
		reload.Deltas[i] = fmt.Sprintf("r%d ", i)
	}
	steps := []string{"start", "secondTab", "permission", "markdown", "reload", "changes"}
	fake.Enqueue(fakeapi.Reply{Text: startReply})
	out := browsertest.Run(t, browsertest.Options{Script: "flow.mjs", BaseURL: "http://" + addr + "/", Token: tok, Params: map[string]any{
		"machineOptional": true, "cwd": cwd, "steps": steps,
		"start":      map[string]any{"prompt": "say hello", "want": startReply},
		"permission": map[string]any{"prompt": runTool, "want": fakeapi.ToolResultPrefix + "done"},
		"markdown":   map[string]any{"prompt": "why is the build slow"},
		"reload":     map[string]any{"prompt": "stream while I reload", "reloadAfter": "r10", "want": reload.FullText()},
	}, OnWait: func(name string, _ map[string]any) any {
		switch name {
		case "permission-done":
			return map[string]any{"fileExists": toolFileExists(t, cwd)}
		case "reload-turn":
			fake.Enqueue(reload)
			return map[string]any{}
		case "markdown-turn":
			fake.Enqueue(fakeapi.Reply{Text: browsertest.FlowMarkdown})
			return map[string]any{}
		case "changes":
			if err := browsertest.GitChange(cwd); err != nil {
				return map[string]any{"error": err.Error()}
			}
			return map[string]any{}
		}
		return map[string]any{"error": "unknown sync point " + name}
	}})
	var r browsertest.FlowResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Steps, steps) {
		t.Errorf("steps done %q, want %q", r.Steps, steps)
	}
	for _, a := range r.Alerts {
		t.Errorf("the app showed an error: %q (at %s)", a.Text, a.URL)
	}
	if n := len(r.Start.Text); n == 0 || r.Start.Text[n-1] != startReply {
		t.Errorf("first reply rendered as %q, want %q", r.Start.Text, startReply)
	}
	if !strings.Contains(r.Permission.PromptText, "Bash") || !r.Permission.FileOnDisk || !toolFileExists(t, cwd) {
		t.Errorf("permission prompt %q, file on disk %v: want Bash's prompt and the file", r.Permission.PromptText, r.Permission.FileOnDisk)
	}
	want := strings.TrimSpace(reload.FullText())
	if got := r.Reload.After; len(got) != len(r.Reload.Before)+1 || !slices.Equal(got[:len(got)-1], r.Reload.Before) || got[len(got)-1] != want {
		t.Errorf("after the reload the assistant texts are\n%q\nwant\n%q + %q", got, r.Reload.Before, want)
	}
	if !slices.Equal(r.AssistantTexts, r.Tab2AssistantTexts) {
		t.Errorf("the second tab shows\n%q\nthe first\n%q", r.Tab2AssistantTexts, r.AssistantTexts)
	}

	// The agent's own record agrees: one session, its text as rendered.
	ctx := ctxT(t)
	l, err := agent.API.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil || len(l.Sessions) != 1 {
		t.Fatalf("ListSessions = %v, %v; want the one session", l, err)
	}
	rs, err := agent.API.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: l.Sessions[0].Id})
	if err != nil {
		t.Fatal(err)
	}
	var evs []*pb.AgentEvent
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	checkSequences(t, evs, 0)
	if got := text(evs); !strings.HasSuffix(got, reload.FullText()) || !strings.HasPrefix(got, startReply) {
		t.Errorf("the agent's events hold the text %q", got)
	}
}
