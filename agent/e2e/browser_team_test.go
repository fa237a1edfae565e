package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/localtoken"
	"github.com/betcode-dev/betcode/shared/browsertest"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// TestBrowserTeamThroughAgent is the ccgrid team view in a real browser
// (web/e2e/team.mjs) against the agent's own web server, the real Claude
// CLI and the fake model: teammate and skill specs saved in Settings and
// listed after a reload; a todo list's tasks in the Team panel; an Agent
// (Task) tool subagent, run in the background, shown working, then stopped
// with its output. The fake model holds the subagent's reply until the page
// showed it working.
func TestBrowserTeamThroughAgent(t *testing.T) {
	browsertest.Require(t)
	const (
		subagentWork  = "SUBAGENTWORK"
		subagentReply = "The flaky test is TestReload: it races the reconnect."
	)
	release, done := make(chan struct{}), make(chan struct{})
	var released bool
	fake, err := fakeapi.Start(fakeapi.Config{Responder: func(req *fakeapi.Request) fakeapi.Reply {
		if req.MainLoop() && req.LastToolResult() == nil {
			switch {
			case strings.Contains(firstUserText(req), subagentWork):
				select {
				case <-release:
				case <-done:
				}
				return fakeapi.Reply{Text: subagentReply}
			case strings.Contains(req.Prompt(), "DELEGATE"):
				name := "Task" // Claude Code before 2.1
				if slices.Contains(req.Tools, "Agent") {
					name = "Agent"
				}
				// In the background (Claude Code 2.1's default): the call
				// returns at once ("Async agent launched") and the teammate
				// works on after the turn, until its SubagentTaskUpdate says
				// it completed.
				return fakeapi.Reply{ToolUse: &fakeapi.ToolUse{Name: name, Input: map[string]any{
					"description": "Find the flaky test", "prompt": subagentWork + " find the flaky test", "subagent_type": "general-purpose"}}}
			}
		}
		return fakeapi.KeywordReply(req)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	t.Cleanup(func() { close(done) }) // runs first: a held reply ends before the server closes

	addr := freeAddr(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: fake.URL(), Args: []string{"--http-listen", addr}})
	tok, err := localtoken.Read(agent.Opts.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	var todos []string
	for _, td := range fakeapi.TodoInput["todos"].([]any) {
		todos = append(todos, td.(map[string]any)["content"].(string))
	}
	out := browsertest.Run(t, browsertest.Options{Script: "team.mjs", BaseURL: "http://" + addr + "/", Token: tok, Timeout: 4 * time.Minute,
		Params: map[string]any{
			"machineOptional": true, "cwd": agent.ProjectDir(t),
			"skill":    map[string]any{"name": "db-query", "description": "Run SQL", "content": "# DB query\n\nConnect with psql."},
			"teammate": map[string]any{"name": "researcher", "role": "Research specialist", "instructions": "Cite sources."},
			"todo":     map[string]any{"prompt": "plan it TODO", "count": len(todos)},
			"delegate": map[string]any{"prompt": "DELEGATE the search"},
		},
		OnWait: func(name string, _ map[string]any) any {
			if name == "teammate-working" && !released {
				released = true
				close(release)
				return map[string]any{}
			}
			return map[string]any{"error": "unknown sync point " + name}
		}})
	var r struct {
		SkillSpecs    []string `json:"skillSpecs"`
		TeammateSpecs []string `json:"teammateSpecs"`
		Tasks         []string `json:"tasks"`
		Working       string   `json:"working"`
		Teammate      struct {
			Text, Status, Output string
		} `json:"teammate"`
		Alerts []struct{ Text, URL string } `json:"alerts"`
		A11y   []struct {
			Scheme, Rule, Impact string
			Targets              []string
		} `json:"a11y"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	for _, a := range r.Alerts {
		t.Errorf("the app showed an error: %q (at %s)", a.Text, a.URL)
	}
	for _, v := range r.A11y {
		t.Errorf("axe-core, %s colour scheme: %s (%s) on %q", v.Scheme, v.Rule, v.Impact, v.Targets)
	}
	if len(r.SkillSpecs) != 1 || !strings.Contains(r.SkillSpecs[0], "db-query") || !strings.Contains(r.SkillSpecs[0], "internal") {
		t.Errorf("skill specs after a reload: %q, want db-query (internal)", r.SkillSpecs)
	}
	if len(r.TeammateSpecs) != 1 || !strings.Contains(r.TeammateSpecs[0], "researcher") || !strings.Contains(r.TeammateSpecs[0], "Skills: db-query") {
		t.Errorf("teammate specs after a reload: %q, want researcher with the skill db-query", r.TeammateSpecs)
	}
	if len(r.Tasks) != len(todos) {
		t.Errorf("the Team panel lists the tasks %q, want %q", r.Tasks, todos)
	}
	for i, want := range todos {
		if i < len(r.Tasks) && !strings.Contains(r.Tasks[i], want) {
			t.Errorf("task %d shows %q, want %q", i, r.Tasks[i], want)
		}
	}
	if !strings.Contains(r.Working, "Find the flaky test") || !strings.Contains(r.Working, "working") {
		t.Errorf("the working teammate shows %q", r.Working)
	}
	if r.Teammate.Status != "stopped" || !strings.Contains(r.Teammate.Output, subagentReply) {
		t.Errorf("the finished teammate: status %q, output %q; want stopped with %q", r.Teammate.Status, r.Teammate.Output, subagentReply)
	}
}

// firstUserText is the text of a request's first user message: a
// subagent's prompt.
func firstUserText(req *fakeapi.Request) string {
	for _, m := range req.Conversation() {
		if m.Role == "user" {
			return m.Text
		}
	}
	return ""
}
