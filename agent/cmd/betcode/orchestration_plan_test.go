package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func TestParsePlan(t *testing.T) {
	tests := []struct {
		name, file, in string
		wantErr        string // "" : valid
	}{
		{name: "minimal", file: "p.yaml", in: "steps:\n  - id: a\n    prompt: hi\n"},
		{name: "json", file: "p.json", in: `{"steps": [{"id": "a", "prompt": "hi"}, {"id": "b", "prompt": "x", "depends_on": ["a"]}]}`},
		{name: "diamond", file: "p.yaml", in: "steps:\n- {id: a, prompt: x}\n- {id: b, prompt: x, depends_on: [a]}\n- {id: c, prompt: x, depends_on: [a]}\n- {id: d, prompt: x, depends_on: [b, c]}\n"},
		{name: "empty file", file: "p.yaml", in: "", wantErr: "p.yaml: the plan is empty"},
		{name: "empty json", file: "p.json", in: "", wantErr: "p.json: the plan is empty"},
		{name: "no steps", file: "p.yaml", in: "name: x\n", wantErr: "p.yaml: no steps"},
		{name: "not a mapping", file: "p.yaml", in: "- a\n- b\n", wantErr: "p.yaml:1: want a mapping with name and steps, not a list"},
		{name: "steps not a list", file: "p.yaml", in: "steps: a\n", wantErr: `p.yaml:1: steps: want a list of steps, not "a"`},
		{name: "malformed yaml", file: "p.yaml", in: "steps:\n  - id: a\n    prompt: x\n   depends_on: [b]\n", wantErr: "p.yaml:1: not valid YAML: did not find expected '-' indicator"},
		{name: "malformed json", file: "p.json", in: "{\n\"steps\": [\n{\"id\": \"a\",}]}", wantErr: "p.json:3: not valid JSON: invalid character '}'"},
		{name: "wrong type", file: "p.yaml", in: "steps:\n  - id: a\n    prompt: x\n    max_attempts: two\n", wantErr: "p.yaml:4: cannot unmarshal !!str `two` into uint32"},
		{name: "wrong json type", file: "p.json", in: `{"steps": [{"id": "a", "prompt": 3}]}`, wantErr: "p.json:1: steps.prompt: want string, not a JSON number"},
		{name: "unknown key, near", file: "p.yaml", in: "steps:\n  - id: a\n    prompt: x\n    depend_on: [b]\n", wantErr: `p.yaml:4: step "a": unknown key "depend_on"; did you mean "depends_on"?`},
		{name: "unknown plan key", file: "p.yaml", in: "title: x\nsteps:\n  - {id: a, prompt: x}\n", wantErr: `p.yaml:1: plan: unknown key "title" (known: name, max_parallel, failure_policy, steps)`},
		{name: "unknown json key", file: "p.json", in: `{"steps": [{"id": "a", "prompt": "x", "dependson": []}]}`, wantErr: `p.json: unknown key "dependson"; did you mean "depends_on"?`},
		{name: "no id", file: "p.yaml", in: "steps:\n  - id: a\n    prompt: x\n  - prompt: y\n", wantErr: "p.yaml:4: step 2 has no id"},
		{name: "no prompt", file: "p.yaml", in: "steps:\n  - id: a\n", wantErr: `p.yaml:2: step "a" has no prompt`},
		{name: "duplicate id", file: "p.yaml", in: "steps:\n  - {id: a, prompt: x}\n  - {id: a, prompt: y}\n", wantErr: `p.yaml:3: step id "a" is used twice (first at line 2)`},
		{name: "duplicate id json", file: "p.json", in: `{"steps": [{"id": "a", "prompt": "x"}, {"id": "a", "prompt": "y"}]}`, wantErr: `p.json: step id "a" is used twice (steps 1 and 2)`},
		{name: "unknown dependency", file: "p.yaml", in: "steps:\n  - {id: a, prompt: x}\n  - {id: b, prompt: y, depends_on: [a, c]}\n", wantErr: `p.yaml:3: step "b" depends on unknown step "c"`},
		{name: "cycle", file: "p.yaml", in: "steps:\n  - {id: a, prompt: x, depends_on: [b]}\n  - {id: b, prompt: y, depends_on: [a]}\n", wantErr: "p.yaml:2: dependency cycle: a -> b -> a"},
		{name: "self dependency", file: "p.yaml", in: "steps:\n  - {id: a, prompt: x}\n  - {id: b, prompt: y, depends_on: [b]}\n", wantErr: "p.yaml:3: dependency cycle: b -> b"},
		{name: "longer cycle after a good part", file: "p.yaml", in: "steps:\n- {id: s, prompt: x}\n- {id: a, prompt: x, depends_on: [s, c]}\n- {id: b, prompt: x, depends_on: [a]}\n- {id: c, prompt: x, depends_on: [b]}\n", wantErr: "p.yaml:3: dependency cycle: a -> c -> b -> a"},
		{name: "too many attempts", file: "p.yaml", in: "steps:\n  - {id: a, prompt: x, max_attempts: 6}\n", wantErr: `step "a": max_attempts 6: at most 5`},
		{name: "auto_approve without tools", file: "p.yaml", in: "steps:\n  - {id: a, prompt: x, auto_approve: true}\n", wantErr: `step "a": auto_approve needs allow_tools`},
		{name: "cwd and worktree", file: "p.yaml", in: "steps:\n  - {id: a, prompt: x, cwd: /tmp, worktree: w}\n", wantErr: `step "a": give at most one of cwd, worktree and create_worktree`},
		{name: "bad provider", file: "p.yaml", in: "steps:\n  - {id: a, prompt: x, provider: nonsense}\n", wantErr: `step "a": provider: `},
		{name: "config without provider", file: "p.yaml", in: "steps:\n  - {id: a, prompt: x, provider_config: {agent: gemini}}\n", wantErr: `step "a": provider_config needs provider`},
		{name: "bad policy", file: "p.yaml", in: "failure_policy: retry\nsteps:\n  - {id: a, prompt: x}\n", wantErr: `failure_policy "retry": want fail-fast or continue`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parsePlan(tt.file, strings.NewReader(tt.in))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("parsePlan: %v", err)
				}
				if len(p.Steps) == 0 {
					t.Fatal("no steps")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("parsePlan error %v, want %q", err, tt.wantErr)
			}
			if !errors.Is(err, errPlan) {
				t.Fatalf("%v is not an errPlan", err)
			}
		})
	}
}

// TestPlanExamples: testdata/plan.yaml (docs/subagents.md's example) and
// testdata/plan.json make the same request, with every field in place.
func TestPlanExamples(t *testing.T) {
	dir := func(d string) (string, error) { return filepath.Join("/base", d), nil }
	var reqs []*pb.CreateOrchestrationRequest
	for _, name := range []string{"testdata/plan.yaml", "testdata/plan.json"} {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := parsePlan(name, f)
		f.Close()
		if err != nil {
			t.Fatalf("parsePlan(%s): %v", name, err)
		}
		req, err := p.request("parent-1", dir)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, req)
	}
	want := &pb.CreateOrchestrationRequest{
		ParentSessionId: "parent-1", Name: "release-prep", MaxParallel: 2, FailurePolicy: pb.FailurePolicy_FAILURE_POLICY_CONTINUE,
		Steps: []*pb.OrchestrationStep{
			{Id: "tests", MaxAttempts: 2, Spec: &pb.SubagentSpec{Name: "tests", Prompt: "Run the test suite and list the failures.",
				AllowedTools: []string{"Read", "Bash(go test *)"}, AutoApprove: true}},
			{Id: "changelog", Spec: &pb.SubagentSpec{Name: "changelog writer", Prompt: "Draft the changelog since the last tag."}},
			{Id: "summary", DependsOn: []string{"tests", "changelog"}, IncludeDependencyResults: true,
				Spec: &pb.SubagentSpec{Name: "summary", Prompt: "Summarise the state of the release for the team."}},
		},
	}
	for i, req := range reqs {
		if !proto.Equal(req, want) {
			t.Errorf("example %d:\n got %v\nwant %v", i, req, want)
		}
	}
}

func TestPlanRequestFields(t *testing.T) {
	in := `name: all
steps:
  - id: a
    name: first
    prompt: do it
    model: m1
    cwd: sub/dir
    allow_tools: [Read]
    auto_approve: true
    max_turns: 3
    max_attempts: 4
    teammate_spec: spec-1
    provider: acp
    provider_config: {agent: gemini}
    metadata: {ticket: "42"}
  - id: b
    prompt: then this
    worktree: wt-1
    depends_on: [a]
  - id: c
    prompt: and this
    create_worktree: true
`
	p, err := parsePlan("p.yaml", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	req, err := p.request("par", func(d string) (string, error) { return "/base/" + d, nil })
	if err != nil {
		t.Fatal(err)
	}
	want := []*pb.OrchestrationStep{
		{Id: "a", MaxAttempts: 4, Spec: &pb.SubagentSpec{Name: "first", Prompt: "do it", Model: "m1", WorkingDirectory: "/base/sub/dir",
			AllowedTools: []string{"Read"}, AutoApprove: true, MaxTurns: 3, TeammateSpecId: "spec-1",
			Provider: pb.SessionProvider_SESSION_PROVIDER_ACP, ProviderConfig: map[string]string{"agent": "gemini"}, Metadata: map[string]string{"ticket": "42"}}},
		{Id: "b", DependsOn: []string{"a"}, Spec: &pb.SubagentSpec{Name: "b", Prompt: "then this", WorktreeId: "wt-1"}},
		{Id: "c", Spec: &pb.SubagentSpec{Name: "c", Prompt: "and this", CreateWorktree: true}},
	}
	if len(req.Steps) != len(want) {
		t.Fatalf("%d steps", len(req.Steps))
	}
	for i := range want {
		if !proto.Equal(req.Steps[i], want[i]) {
			t.Errorf("step %d:\n got %v\nwant %v", i, req.Steps[i], want[i])
		}
	}
	// A cwd the resolver refuses names the step and its line.
	_, err = p.request("par", func(string) (string, error) { return "", errors.New("through a relay, give an absolute path") })
	if err == nil || err.Error() != `p.yaml:3: step "a": cwd: through a relay, give an absolute path` {
		t.Fatalf("refused cwd: %v", err)
	}
}
