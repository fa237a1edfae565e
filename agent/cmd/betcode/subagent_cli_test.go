package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// These tests run the subagent, orchestration and team commands in
// process against a real agent (testenv.StartAgent) running the real Claude
// Code CLI on the fake model API, whose keywords script the subagents'
// turns (STREAM n, STALL, ERR400; see shared/fakeapi).

// cliRun runs betcode against one agent.
type cliRun struct {
	t    *testing.T
	ctx  context.Context
	sock string
}

// run returns stdout, stderr (ending with the error, as main prints it) and
// the exit code.
func (c cliRun) run(args ...string) (string, string, int) {
	c.t.Helper()
	out, errOut, err := runCLIContext(c.ctx, "", append([]string{"--agent", "unix://" + c.sock}, args...)...)
	if err != nil {
		errOut += "betcode: " + err.Error() + "\n"
	}
	return out, errOut, client.ExitCode(err)
}

// ok runs and fails the test unless the exit code is 0.
func (c cliRun) ok(args ...string) (string, string) {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("betcode %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out, errOut
}

// fails runs and fails the test unless the exit code is code and stderr
// has every one of want.
func (c cliRun) fails(code int, want []string, args ...string) string {
	c.t.Helper()
	out, errOut, got := c.run(args...)
	if got != code {
		c.t.Fatalf("betcode %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, code, out, errOut)
	}
	for _, w := range want {
		if !strings.Contains(errOut, w) {
			c.t.Fatalf("betcode %s: stderr lacks %q\nstderr: %s", strings.Join(args, " "), w, errOut)
		}
	}
	return errOut
}

// startCLIAgent starts an agent with args and a parent session in a
// project directory of its own.
func startCLIAgent(t *testing.T, args ...string) (cliRun, *testenv.Agent, *fakeapi.Server, string) {
	t.Helper()
	cliEnv(t)
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(), Args: args})
	ctx := testenv.Ctx(t, 5*time.Minute)
	resp, err := agent.API.StartSession(ctx, &pb.StartSessionRequest{WorkingDirectory: agent.ProjectDir(t), Name: "coordinator"})
	if err != nil {
		t.Fatalf("StartSession: %v", err)
	}
	return cliRun{t: t, ctx: ctx, sock: agent.Opts.Socket}, agent, api, resp.GetSession().GetId()
}

// field is the value of "key:" in printSubagent's output.
func field(t *testing.T, out, key string) string {
	t.Helper()
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %q in\n%s", key, out)
	return ""
}

// fromJSON decodes one JSON object printed by --json.
func fromJSON[T any, M interface {
	*T
	proto.Message
}](t *testing.T, out string) M {
	t.Helper()
	m := M(new(T))
	if err := protojson.Unmarshal([]byte(out), m); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	return m
}

// jsonLines decodes the JSON lines printed by --json with --watch.
func jsonLines[T any, M interface {
	*T
	proto.Message
}](t *testing.T, out string) []M {
	t.Helper()
	var list []M
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		list = append(list, fromJSON[T, M](t, sc.Text()))
	}
	return list
}

// waitPrompts waits until each prompt reached the fake model.
func waitPrompts(t *testing.T, ctx context.Context, api *fakeapi.Server, prompts ...string) {
	t.Helper()
	if err := api.WaitPrompts(ctx, prompts...); err != nil {
		t.Fatal(err)
	}
}

func writePlan(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSubagentCommands(t *testing.T) {
	bc, _, api, parent := startCLIAgent(t, "--feature-flag", server.SubagentOrchestration)

	// spawn prints the subagent; watch streams its text, statuses on stderr.
	out, errOut := bc.ok("subagent", "spawn", "--parent", parent, "--prompt", "STREAM 5", "--name", "counter")
	id := field(t, out, "id")
	if field(t, out, "parent") != parent || field(t, out, "name") != "counter" || !strings.Contains(errOut, "betcode subagent watch "+id) {
		t.Fatalf("spawn:\n%s\n%s", out, errOut)
	}
	words := strings.Join(fakeapi.NumberedDeltas(5), "")
	out, errOut = bc.ok("subagent", "watch", id)
	if !strings.Contains(out, strings.TrimSpace(words)) || !strings.Contains(errOut, "PENDING -> RUNNING") || !strings.Contains(errOut, "RUNNING -> COMPLETED") {
		t.Fatalf("watch:\nstdout: %s\nstderr: %s", out, errOut)
	}

	// From a sequence, as JSON: only the later events, the end last.
	out, _ = bc.ok("subagent", "watch", id, "--from-sequence", "3", "--json")
	lines := jsonLines[pb.WatchSubagentResponse](t, out)
	for _, l := range lines {
		if ev := l.GetAgentEvent(); ev != nil && ev.GetSequence() <= 3 {
			t.Fatalf("--from-sequence 3 replayed sequence %d", ev.GetSequence())
		}
	}
	if len(lines) == 0 || lines[len(lines)-1].GetStatusChange().GetStatus() != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED {
		t.Fatalf("watch --json:\n%s", out)
	}

	// spawn --watch follows to the end.
	out, errOut = bc.ok("subagent", "spawn", "--parent", parent, "--prompt", "STREAM 3", "--name", "short", "--watch")
	if !strings.Contains(out, "w0 w1 w2") || !strings.Contains(errOut, "RUNNING -> COMPLETED") {
		t.Fatalf("spawn --watch:\nstdout: %s\nstderr: %s", out, errOut)
	}

	// list: the table, JSON, a status filter.
	out, _ = bc.ok("subagent", "list", "--parent", parent)
	if !strings.HasPrefix(out, "ID ") || !strings.Contains(out, id) || strings.Count(out, "COMPLETED") != 2 || !strings.Contains(out, "counter") {
		t.Fatalf("list:\n%s", out)
	}
	out, _ = bc.ok("subagent", "list", "--parent", parent, "--json")
	list := fromJSON[pb.ListSubagentsResponse](t, out)
	if len(list.GetSubagents()) != 2 || list.GetSubagents()[0].GetId() != id || list.GetSubagents()[0].GetResult() != words {
		t.Fatalf("list --json: %v", list)
	}
	if out, _ = bc.ok("subagent", "list", "--status", "running"); strings.Count(out, "\n") != 1 {
		t.Fatalf("list --status running:\n%s", out)
	}

	// cancel a stalled subagent; watching it then ends with exit 1.
	out, _ = bc.ok("subagent", "spawn", "--parent", parent, "--prompt", "STALL please", "--name", "staller", "--json")
	stalled := fromJSON[pb.Subagent](t, out).GetId()
	waitPrompts(t, bc.ctx, api, "STALL please")
	out, _ = bc.ok("subagent", "cancel", stalled, "--reason", "test")
	if !strings.Contains(out, "cancelled subagent "+stalled+" (staller): now CANCELLED") {
		t.Fatalf("cancel: %s", out)
	}
	bc.fails(client.ExitAgentError, []string{"subagent " + stalled + " ended CANCELLED"}, "subagent", "watch", stalled)
	out, _ = bc.ok("subagent", "cancel", stalled)
	if !strings.Contains(out, "had already ended: CANCELLED") {
		t.Fatalf("second cancel: %s", out)
	}

	// Usage errors and the agent's refusals.
	bc.fails(client.ExitInvalidArgs, []string{"needs --prompt"}, "subagent", "spawn", "--parent", parent)
	bc.fails(client.ExitInvalidArgs, []string{"--auto-approve needs --allow-tool"}, "subagent", "spawn", "--parent", parent, "--prompt", "x", "--auto-approve")
	bc.fails(client.ExitInvalidArgs, []string{"give only one of --cwd, --create-worktree"}, "subagent", "spawn", "--parent", parent, "--prompt", "x", "--cwd", "/tmp", "--create-worktree")
	bc.fails(client.ExitInvalidArgs, []string{`--status "done"`}, "subagent", "list", "--status", "done")
	bc.fails(client.ExitSessionNotFound, []string{"spawn subagent: SESSION_NOT_FOUND"}, "subagent", "spawn", "--parent", "no-such-session", "--prompt", "x")
	bc.fails(client.ExitSessionNotFound, []string{"watch subagent: SUBAGENT_NOT_FOUND"}, "subagent", "watch", "no-such-subagent")
}

func TestOrchestrationCommands(t *testing.T) {
	bc, _, api, parent := startCLIAgent(t, "--feature-flag", server.SubagentOrchestration)

	// The documented example plan, watched to its end.
	out, errOut := bc.ok("orchestration", "create", "--parent", parent, "-f", "testdata/plan.yaml", "--watch")
	var id string
	if _, err := fmt.Sscanf(errOut, "orchestration %s (release-prep): 3 steps", &id); err != nil {
		t.Fatalf("create --watch: no id on stderr (%v):\n%s", err, errOut)
	}
	for _, want := range []string{`orchestration ` + id + ` "release-prep": COMPLETED, 3/3 steps completed`, "  summary  PENDING -> RUNNING  attempt 1",
		"tests    ", "changelog", "tests, changelog"} {
		if !strings.Contains(out, want) {
			t.Fatalf("create --watch: stdout lacks %q:\n%s", want, out)
		}
	}
	// summary started after both others completed, with their results.
	start := strings.Index(out, "summary  PENDING -> RUNNING")
	if start < strings.Index(out, "tests  RUNNING -> COMPLETED") || start < strings.Index(out, "changelog  RUNNING -> COMPLETED") {
		t.Fatalf("summary started before tests and changelog completed:\n%s", out)
	}
	if !slices.ContainsFunc(api.Requests(), func(r fakeapi.Request) bool {
		p := r.Prompt()
		return strings.HasPrefix(p, "Summarise the state of the release") && strings.Contains(p, fakeapi.HelloText)
	}) {
		t.Fatal("the summary step's prompt lacks its dependencies' results")
	}

	// Watching a finished orchestration prints its table and exits 0.
	out, _ = bc.ok("orchestration", "watch", id)
	if !strings.Contains(out, "COMPLETED, 3/3 steps completed") {
		t.Fatalf("watch of a completed orchestration:\n%s", out)
	}
	out, _ = bc.ok("subagent", "list", "--orchestration", id, "--json")
	if subs := fromJSON[pb.ListSubagentsResponse](t, out).GetSubagents(); len(subs) != 3 ||
		slices.ContainsFunc(subs, func(sa *pb.Subagent) bool { return sa.GetStatus() != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED }) {
		t.Fatalf("the orchestration's subagents: %v", subs)
	}

	// The team view of the same work.
	out, _ = bc.ok("team", "teammates", parent)
	for _, want := range []string{"tests", "changelog writer", "summary", "subagent", "stopped"} {
		if !strings.Contains(out, want) {
			t.Fatalf("team teammates lacks %q:\n%s", want, out)
		}
	}
	out, _ = bc.ok("team", "tasks", parent)
	if !strings.Contains(out, short(id)+"/summary") || strings.Count(out, "completed") != 3 || !strings.Contains(out, "tests, changelog") {
		t.Fatalf("team tasks:\n%s", out)
	}
	out, _ = bc.ok("team", "tasks", parent, "--json")
	if tasks := fromJSON[pb.ListTasksResponse](t, out).GetTasks(); len(tasks) != 3 {
		t.Fatalf("team tasks --json: %v", tasks)
	}

	// The JSON example, created then watched as JSON lines.
	out, _ = bc.ok("orchestration", "create", "--parent", parent, "-f", "testdata/plan.json", "--json")
	o := fromJSON[pb.Orchestration](t, out)
	if o.GetName() != "release-prep" || len(o.GetSteps()) != 3 {
		t.Fatalf("create --json: %v", o)
	}
	out, _ = bc.ok("orchestration", "watch", o.GetId(), "--json")
	events := jsonLines[pb.WatchOrchestrationResponse](t, out)
	if len(events) < 2 || events[len(events)-1].GetSnapshot().GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_COMPLETED {
		t.Fatalf("watch --json:\n%s", out)
	}

	// list: both, oldest first.
	out, _ = bc.ok("orchestration", "list", "--parent", parent)
	if first, second := strings.Index(out, id), strings.Index(out, o.GetId()); first < 0 || second < first || strings.Count(out, "3/3") != 2 {
		t.Fatalf("orchestration list:\n%s", out)
	}

	// A failing step: --continue runs the rest, skips its dependent, exit 1.
	failing := writePlan(t, "failing.yaml", "name: failing\nsteps:\n  - {id: a, prompt: ERR400 please}\n  - {id: b, prompt: hello}\n  - {id: c, prompt: summarise, depends_on: [a, b]}\n")
	errOut = bc.fails(client.ExitAgentError, []string{"ended FAILED: a FAILED", "c SKIPPED"}, "orchestration", "create", "--parent", parent, "-f", failing, "--continue", "--watch")
	if regexp.MustCompile(`\bb (FAILED|SKIPPED|CANCELLED)`).MatchString(errOut) { // not "b ": an id may end in b
		t.Fatalf("the completed step b is named among the failures: %s", errOut)
	}

	// Cancel midway: the running steps and the one not started end CANCELLED.
	stalling := writePlan(t, "stall.yaml", "steps:\n  - {id: a, prompt: STALL one}\n  - {id: b, prompt: STALL two}\n  - {id: c, prompt: summarise, depends_on: [a]}\n")
	out, _ = bc.ok("orchestration", "create", "--parent", parent, "-f", stalling)
	stalled := strings.TrimSpace(out)
	waitPrompts(t, bc.ctx, api, "STALL one", "STALL two")
	out, _ = bc.ok("orchestration", "cancel", stalled, "--reason", "test")
	if !strings.Contains(out, "CANCELLED, 0/3 steps completed") || strings.Count(out, "CANCELLED") != 4 {
		t.Fatalf("cancel:\n%s", out)
	}
	bc.fails(client.ExitAgentError, []string{"ended CANCELLED"}, "orchestration", "watch", stalled)

	// Bad plans are refused before anything is sent.
	before, _ := bc.ok("subagent", "list", "--json")
	for _, tc := range []struct{ file, want string }{
		{"testdata/bad/cycle.yaml", "testdata/bad/cycle.yaml:3: dependency cycle: build -> test -> build"},
		{"testdata/bad/unknown-dependency.yaml", `testdata/bad/unknown-dependency.yaml:5: step "deploy" depends on unknown step "tests"`},
		{"testdata/bad/malformed.yaml", "testdata/bad/malformed.yaml:2: not valid YAML: did not find expected '-' indicator"},
		{"testdata/no-such-plan.yaml", "no such file or directory"},
	} {
		bc.fails(client.ExitInvalidArgs, []string{tc.want}, "orchestration", "create", "--parent", parent, "-f", tc.file)
	}
	if after, _ := bc.ok("subagent", "list", "--json"); after != before {
		t.Fatal("a refused plan started subagents")
	}
	bc.fails(client.ExitInvalidArgs, []string{"needs --file"}, "orchestration", "create", "--parent", parent)
	bc.fails(client.ExitInvalidArgs, []string{"give only one of --fail-fast, --continue"}, "orchestration", "create", "--parent", parent, "-f", "testdata/plan.yaml", "--fail-fast", "--continue")
	bc.fails(client.ExitSessionNotFound, []string{"SESSION_NOT_FOUND"}, "orchestration", "create", "--parent", "no-such-session", "-f", "testdata/plan.yaml")
}

func TestTeamSpecCommands(t *testing.T) {
	bc, _, api, parent := startCLIAgent(t, "--feature-flag", server.SubagentOrchestration)
	skillFile := writePlan(t, "SKILL.md", "---\nname: db-query\n---\nQuery the database with psql.\n")

	out, _ := bc.ok("team", "skills", "create", "--name", "db-query", "--description", "Query the database", "--file", skillFile)
	skill := strings.TrimSpace(out)
	out, errOut := bc.ok("team", "specs", "create", "--name", "researcher", "--role", "Research specialist", "--instructions", "Read the code first.", "--skill", skill)
	spec := strings.TrimSpace(out)
	if spec == "" || !strings.Contains(errOut, "--teammate-spec "+spec) {
		t.Fatalf("specs create: %q\n%s", out, errOut)
	}

	out, _ = bc.ok("team", "specs", "list")
	if !strings.Contains(out, spec) || !strings.Contains(out, "researcher") || !strings.Contains(out, "Research specialist") || !strings.Contains(out, skill) {
		t.Fatalf("specs list:\n%s", out)
	}
	out, _ = bc.ok("team", "specs", "list", "--json")
	if specs := fromJSON[pb.ListTeammateSpecsResponse](t, out).GetSpecs(); len(specs) != 1 || specs[0].GetInstructions() != "Read the code first." {
		t.Fatalf("specs list --json: %v", specs)
	}
	out, _ = bc.ok("team", "skills", "list")
	if !strings.Contains(out, skill) || !strings.Contains(out, "db-query") || !strings.Contains(out, "internal") {
		t.Fatalf("skills list:\n%s", out)
	}

	// A subagent given the spec gets its instructions before the prompt.
	bc.ok("subagent", "spawn", "--parent", parent, "--prompt", "hello researcher", "--teammate-spec", spec, "--watch")
	if !slices.ContainsFunc(api.Requests(), func(r fakeapi.Request) bool {
		return strings.Contains(r.Prompt(), "Read the code first.") && strings.Contains(r.Prompt(), "hello researcher")
	}) {
		t.Fatal("the subagent's prompt lacks the teammate spec's instructions")
	}

	// Refusals: a duplicate name, a skill still in use, an internal skill
	// without its SKILL.md.
	bc.fails(client.ExitInvalidArgs, []string{"create teammate spec: SPEC_EXISTS"}, "team", "specs", "create", "--name", "researcher")
	bc.fails(client.ExitAgentError, []string{"delete skill spec: SKILL_IN_USE"}, "team", "skills", "delete", skill)
	bc.fails(client.ExitInvalidArgs, []string{"an internal skill needs its SKILL.md"}, "team", "skills", "create", "--name", "empty")
	bc.fails(client.ExitInvalidArgs, []string{"needs --name"}, "team", "specs", "create")

	out, _ = bc.ok("team", "specs", "delete", spec)
	if out != "deleted teammate spec "+spec+"\n" {
		t.Fatalf("specs delete: %q", out)
	}
	bc.ok("team", "skills", "delete", skill)
	if out, _ = bc.ok("team", "specs", "list"); strings.Count(out, "\n") != 1 {
		t.Fatalf("specs list after delete:\n%s", out)
	}
	bc.fails(client.ExitSessionNotFound, []string{"SPEC_NOT_FOUND"}, "team", "specs", "delete", spec)
}

// TestSubagentFlagOff: without the feature flag the commands say how to
// turn it on; TeamService is served all the same.
func TestSubagentFlagOff(t *testing.T) {
	bc, _, _, parent := startCLIAgent(t)
	hint := []string{"NOT_IMPLEMENTED", "hint: SubagentService is ALPHA and off by default", "--feature-flag subagent_orchestration", "docs/subagents.md"}
	bc.fails(client.ExitAgentError, hint, "subagent", "list")
	bc.fails(client.ExitAgentError, hint, "subagent", "spawn", "--parent", parent, "--prompt", "hi")
	bc.fails(client.ExitAgentError, hint, "orchestration", "create", "--parent", parent, "-f", "testdata/plan.yaml")
	bc.fails(client.ExitAgentError, hint, "orchestration", "watch", "some-id")
	bc.ok("team", "specs", "list")
}
