package acp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// requireClaudeAgent returns the pinned claude-agent-acp or fails the test
// with what to install. It never skips: a missing agent must not turn
// these tests green.
func requireClaudeAgent(t testing.TB) string {
	t.Helper()
	p, err := FindClaudeAgent()
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%v\nCI must install the pinned ACP agent before the tests: run make acp (scripts/install-acp.sh; needs Node.js and npm)", err)
	}
	t.Fatalf("%v\ninstall it once with `make acp` (or scripts/install-acp.sh), or point %s at a claude-agent-acp %s", err, ClaudeAgentBinEnv, PinnedClaudeAgentVersion)
	return ""
}

// writtenFile is what the fake model's WRITEFILE asks Claude's Write tool
// to create.
const writtenFile = "written-through-acp.txt"

// startClaudeAgent runs the real claude-agent-acp against the fake
// Messages API in a fresh project directory.
func startClaudeAgent(t *testing.T) (*fakeRun, *fakeapi.Server) {
	t.Helper()
	bin := requireClaudeAgent(t)
	home, dir := t.TempDir(), t.TempDir()
	api, err := fakeapi.Start(fakeapi.Config{Responder: func(r *fakeapi.Request) fakeapi.Reply {
		if r.LastToolResult() == nil && strings.Contains(r.Prompt(), "WRITEFILE") {
			return fakeapi.Reply{Text: "Writing.", ToolUse: &fakeapi.ToolUse{Name: "Write", Input: map[string]any{
				"file_path": filepath.Join(dir, writtenFile), "content": "written through ACP\n",
			}}}
		}
		return fakeapi.KeywordReply(r)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Close() })
	p := &Provider{Agents: []Agent{{Name: "claude", Command: []string{bin}}}}
	conv, err := p.Start(ctxT(t), provider.Options{SessionID: "s1", Dir: dir, Env: ClaudeAgentEnv(home, api.URL()), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	c := conv.(*conversation)
	t.Cleanup(func() {
		c.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("claude-agent-acp stderr:\n%s", c.Stderr())
		}
	})
	return &fakeRun{c: c, r: newReader(t, c), dir: dir}, api
}

func TestClaudeAgent(t *testing.T) {
	f, _ := startClaudeAgent(t)
	if f.c.ResumeID() == "" {
		t.Error("claude-agent-acp advertises loadSession, yet no resume id")
	}
	t.Run("text", func(t *testing.T) {
		evs := events(f.say(t, "hello", nil))
		if got := textOf(evs); got != "Hello from the fake model." {
			t.Errorf("text %q", got)
		}
		if tc := lastTurnComplete(evs); tc.GetStopReason() != "end_turn" {
			t.Errorf("turn complete %v", tc)
		}
	})
	tool := func(t *testing.T, d provider.Decision) (*provider.PermissionAsk, []*pb.AgentEvent) {
		var ask *provider.PermissionAsk
		evs := events(f.say(t, "RUNTOOL please", func(a *provider.PermissionAsk) provider.Answer {
			if ask != nil {
				t.Errorf("second ask %+v", a)
			}
			ask = a
			return provider.Answer{Decision: d}
		}))
		if ask == nil {
			t.Fatalf("no permission ask; events %v", evs)
		}
		if ask.Tool != "Bash" || !strings.Contains(string(ask.Input), `"command":"touch created-by-tool.txt \u0026\u0026 echo done"`) {
			t.Errorf("ask %s %s, want Bash with the fake's command", ask.Tool, ask.Input)
		}
		return ask, evs
	}
	t.Run("permission denied", func(t *testing.T) {
		_, evs := tool(t, provider.Deny)
		if _, err := os.Stat(filepath.Join(f.dir, "created-by-tool.txt")); !os.IsNotExist(err) {
			t.Errorf("denied tool ran: stat %v", err)
		}
		if tc := lastTurnComplete(evs); tc == nil {
			t.Error("no turn complete")
		}
	})
	t.Run("permission allowed", func(t *testing.T) {
		ask, evs := tool(t, provider.Allow)
		if _, err := os.Stat(filepath.Join(f.dir, "created-by-tool.txt")); err != nil {
			t.Errorf("allowed tool did not run: %v", err)
		}
		var res *pb.ToolCallResult
		for _, e := range evs {
			if x := e.GetToolCallResult(); x != nil && x.ToolId == ask.ToolUseID {
				res = x
			}
		}
		if res == nil || res.IsError || !strings.Contains(res.Output, "done") {
			t.Errorf("tool result %v", res)
		}
		if got := textOf(evs); !strings.Contains(got, "Tool result received") {
			t.Errorf("text %q", got)
		}
	})
	t.Run("file written by its tools", func(t *testing.T) {
		var ask *provider.PermissionAsk
		f.say(t, "WRITEFILE now", func(a *provider.PermissionAsk) provider.Answer {
			ask = a
			return provider.Answer{Decision: provider.Allow}
		})
		if ask == nil || ask.Tool != "Write" || !strings.Contains(string(ask.Input), filepath.Join(f.dir, writtenFile)) {
			t.Errorf("ask %+v, want Write of %s", ask, writtenFile)
		}
		b, err := os.ReadFile(filepath.Join(f.dir, writtenFile))
		if err != nil || string(b) != "written through ACP\n" {
			t.Errorf("%s = %q, %v", writtenFile, b, err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		if err := f.c.SendTurn(provider.Turn{Text: "SLOW"}); err != nil {
			t.Fatal(err)
		}
		var outs []provider.Output
		for textOf(events(outs)) == "" {
			o, _ := f.r.next()
			outs = append(outs, o)
		}
		if err := f.c.InterruptTurn(); err != nil {
			t.Fatal(err)
		}
		outs = f.r.turn(f.c, nil)
		if tc := lastTurnComplete(events(outs)); tc.GetStopReason() != "cancelled" {
			t.Errorf("turn complete %v", tc)
		}
	})
	t.Run("after cancel", func(t *testing.T) {
		if got := textOf(events(f.say(t, "hello again", nil))); got != "Hello from the fake model." {
			t.Errorf("text %q", got)
		}
	})
}
