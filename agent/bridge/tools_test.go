package bridge

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Lines for the special tools, shaped like the reference's.

func modeInit(mode string) string {
	return fmt.Sprintf(`{"type":"system","subtype":"init","cwd":"/home/dev/p","session_id":"s1","tools":["Bash","ExitPlanMode"],"model":"claude-opus-5-5","permissionMode":%q,"uuid":"u1"}`, mode)
}

func modeStatus(mode string) string {
	return fmt.Sprintf(`{"type":"system","subtype":"status","status":null,"permissionMode":%q,"uuid":"u2","session_id":"s1"}`, mode)
}

// toolUse is an assistant line with one tool_use block; parent is "null"
// or a quoted Agent tool id.
func toolUse(parent, id, name, input string) string {
	return fmt.Sprintf(`{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"tool_use","id":%q,"name":%q,"input":%s}],"stop_reason":null},"parent_tool_use_id":%s,"session_id":"s1","uuid":"u3"}`, id, name, input, parent)
}

// toolResult is a user line with one tool_result; toolUseResult is raw
// JSON or "" for none.
func toolResult(id, content string, isError bool, toolUseResult string) string {
	tur := ""
	if toolUseResult != "" {
		tur = `,"tool_use_result":` + toolUseResult
	}
	return fmt.Sprintf(`{"type":"user","message":{"role":"user","content":[{"tool_use_id":%q,"type":"tool_result","content":%q,"is_error":%t}]},"parent_tool_use_id":null,"session_id":"s1","uuid":"u4"%s}`, id, content, isError, tur)
}

func canUseTool(requestID, tool, input, toolUseID, extra string) string {
	return fmt.Sprintf(`{"type":"control_request","request_id":%q,"request":{"subtype":"can_use_tool","tool_name":%q,"display_name":%q,"input":%s,"tool_use_id":%q%s}}`, requestID, tool, tool, input, toolUseID, extra)
}

const interruptedResult = `{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":2,"stop_reason":null,"terminal_reason":"aborted_tools","errors":["[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=tool_use"],"session_id":"s1","total_cost_usd":0,"duration_ms":40,"uuid":"u5"}`

// only keeps the events of the given kinds (describe prefixes).
func only(descs []string, prefixes ...string) []string {
	var out []string
	for _, d := range descs {
		for _, p := range prefixes {
			if strings.HasPrefix(d, p) {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

func TestPlanMode(t *testing.T) {
	const exitID = "toolu_p1"
	tests := []struct {
		name     string
		lines    []string
		want     []string // plan_mode events (and permission ones)
		planMode bool
	}{
		{
			name:  "not in plan mode",
			lines: []string{modeInit("default"), modeStatus("acceptEdits"), modeInit("acceptEdits")},
		},
		{
			// The older ExitPlanMode input carries the plan: no need to wait.
			name: "plan from the ExitPlanMode input",
			lines: []string{
				modeInit("plan"),
				toolUse("null", exitID, "ExitPlanMode", `{"plan":"1. Parse\n2. Test"}`),
				canUseTool("r1", "ExitPlanMode", `{"plan":"1. Parse\n2. Test"}`, exitID, `,"requires_user_interaction":true`),
				modeStatus("default"),
				toolResult(exitID, "User has approved your plan.", false, `{"plan":"from the file","isAgent":false}`),
			},
			want: []string{
				`plan_mode active=true plan=""`,
				`permission r1 ExitPlanMode desc="" input={"plan":"1. Parse\n2. Test"} tool_use=toolu_p1`,
				`plan_mode active=false plan="1. Parse\n2. Test"`,
			},
		},
		{
			name: "tool result before the mode change",
			lines: []string{
				modeInit("plan"),
				toolUse("null", exitID, "ExitPlanMode", `{}`),
				toolResult(exitID, "User has approved your plan.", false, `{"plan":"the plan","isAgent":false,"filePath":"/h/.claude/plans/p.md"}`),
				modeStatus("default"),
			},
			want: []string{`plan_mode active=true plan=""`, `plan_mode active=false plan="the plan"`},
		},
		{
			// set_permission_mode in and out: no ExitPlanMode to wait for.
			name:     "mode switched by the host",
			lines:    []string{modeInit("default"), modeStatus("plan"), modeStatus("plan"), modeStatus("acceptEdits"), modeStatus("plan")},
			want:     []string{`plan_mode active=true plan=""`, `plan_mode active=false plan=""`, `plan_mode active=true plan=""`},
			planMode: true,
		},
		{
			// Denied: the mode stays; the next turn's init says plan again.
			name: "ExitPlanMode denied",
			lines: []string{
				modeInit("plan"),
				toolUse("null", exitID, "ExitPlanMode", `{"plan":"P"}`),
				toolResult(exitID, "User rejected the plan", true, `"Error: User rejected the plan"`),
				modeInit("plan"),
			},
			want:     []string{`plan_mode active=true plan=""`},
			planMode: true,
		},
		{
			// The mode changed but the tool's result never came: the turn's
			// end announces the exit.
			name: "no tool result",
			lines: []string{
				modeInit("plan"),
				toolUse("null", exitID, "ExitPlanMode", `{}`),
				modeStatus("default"),
				interruptedResult,
			},
			want: []string{`plan_mode active=true plan=""`, `plan_mode active=false plan=""`},
		},
		{
			name: "back into plan mode while waiting for the plan",
			lines: []string{
				modeInit("plan"),
				toolUse("null", exitID, "ExitPlanMode", `{}`),
				modeStatus("default"),
				modeStatus("plan"),
			},
			want:     []string{`plan_mode active=true plan=""`, `plan_mode active=false plan=""`, `plan_mode active=true plan=""`},
			planMode: true,
		},
		{
			// A subagent's ExitPlanMode is not the session's: nothing waits for it.
			name: "subagent ExitPlanMode",
			lines: []string{
				modeInit("plan"),
				toolUse(`"toolu_agent"`, "toolu_sub", "ExitPlanMode", `{"plan":"sub plan"}`),
				modeStatus("default"),
			},
			want: []string{`plan_mode active=true plan=""`, `plan_mode active=false plan=""`},
		},
		{
			// A null plan in the result is no plan.
			name: "null plan in the result",
			lines: []string{
				modeInit("plan"),
				toolUse("null", exitID, "ExitPlanMode", `{}`),
				modeStatus("default"),
				toolResult(exitID, "ok", false, `{"plan":null,"isAgent":false}`),
			},
			want: []string{`plan_mode active=true plan=""`, `plan_mode active=false plan=""`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTranslator()
			got := only(translate(t, tr, tt.lines...), "plan_mode", "permission")
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if tr.PlanMode() != tt.planMode {
				t.Errorf("PlanMode() = %t, want %t", tr.PlanMode(), tt.planMode)
			}
		})
	}
}

func TestAskUserQuestion(t *testing.T) {
	const taskStarted = `{"type":"system","subtype":"task_started","task_id":"agent1","tool_use_id":"toolu_agent","description":"d","subagent_type":"general-purpose","uuid":"u6","session_id":"s1"}`
	tests := []struct {
		name  string
		lines []string
		want  []string
	}{
		{
			// Nothing to ask: the request still needs an answer, so it is
			// offered as a permission.
			name:  "no questions",
			lines: []string{canUseTool("r1", "AskUserQuestion", `{}`, "toolu_q", `,"requires_user_interaction":true`)},
			want:  []string{`permission r1 AskUserQuestion desc="" input={} tool_use=toolu_q`, `status WAITING_FOR_USER "AskUserQuestion"`},
		},
		{
			name:  "undecodable questions",
			lines: []string{canUseTool("r1", "AskUserQuestion", `{"questions":"which?"}`, "toolu_q", "")},
			want:  []string{`permission r1 AskUserQuestion desc="" input={"questions":"which?"} tool_use=toolu_q`, `status WAITING_FOR_USER "AskUserQuestion"`},
		},
		{
			name:  "question without text is skipped",
			lines: []string{canUseTool("r1", "AskUserQuestion", `{"questions":[{"question":"","options":[]},{"question":"Go on?","header":"Next","multiSelect":false,"options":[{"label":"Yes","description":"Continue","preview":"x"},{"label":"No"}]}]}`, "toolu_q", "")},
			want:  []string{`question r1 multi=false "Go on?" [Yes|Yes|Continue] [No|No|]`, `status WAITING_FOR_USER "AskUserQuestion"`},
		},
		{
			name: "asked by a subagent",
			lines: []string{taskStarted, canUseTool("r2", "AskUserQuestion",
				`{"questions":[{"question":"A?","header":"A","multiSelect":true,"options":[{"label":"x","description":"X"},{"label":"y","description":"Y"}]},{"question":"B?","header":"B","multiSelect":false,"options":[{"label":"z","description":"Z"},{"label":"w","description":"W"}]}]}`,
				"toolu_q2", `,"agent_id":"agent1"`)},
			want: []string{
				`subagent_task toolu_agent agent1 STARTED bg=false desc="d" type=general-purpose`,
				`[sub toolu_agent] question r2 multi=true "A?" [x|x|X] [y|y|Y]`,
				`[sub toolu_agent] question r2 multi=false "B?" [z|z|Z] [w|w|W]`,
				`status WAITING_FOR_USER "AskUserQuestion"`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := translate(t, newTranslator(), tt.lines...)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestPermissionSuggestions(t *testing.T) {
	// Elements that are not objects are dropped; the rest kept in order.
	got := translate(t, newTranslator(), canUseTool("r1", "mcp__myserver__echo", `{"text":"hi"}`, "toolu_m",
		`,"permission_suggestions":[{"type":"addRules","rules":[{"toolName":"mcp__myserver__echo"}],"behavior":"allow","destination":"localSettings"},"bogus",{"type":"setMode","mode":"acceptEdits","destination":"session"}]`))
	want := []string{
		`permission r1 mcp__myserver__echo desc="" input={"text":"hi"} tool_use=toolu_m` +
			` suggest={"behavior":"allow","destination":"localSettings","rules":[{"toolName":"mcp__myserver__echo"}],"type":"addRules"}` +
			` suggest={"destination":"session","mode":"acceptEdits","type":"setMode"}`,
		`status WAITING_FOR_USER "mcp__myserver__echo"`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestTodoWrite(t *testing.T) {
	streamed := func(id, input string) []string {
		return []string{
			`{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1","model":"claude-opus-5-5"}},"parent_tool_use_id":null}`,
			fmt.Sprintf(`{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":%q,"name":"TodoWrite","input":{}}},"parent_tool_use_id":null}`, id),
			fmt.Sprintf(`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":%q}},"parent_tool_use_id":null}`, input),
			`{"type":"stream_event","event":{"type":"content_block_stop","index":0},"parent_tool_use_id":null}`,
		}
	}
	const todos = `{"todos":[{"content":"Parse","status":"in_progress","activeForm":"Parsing"},{"content":"Ship","status":"blocked","activeForm":"Shipping"}]}`
	const want = `todos [1 IN_PROGRESS "Parse" active="Parsing"] [2 TODO_STATUS_UNSPECIFIED "Ship" active="Shipping"]`
	tests := []struct {
		name  string
		lines []string
		want  []string
	}{
		{
			name:  "from the stream alone",
			lines: streamed("toolu_t1", todos),
			want:  []string{want},
		},
		{
			name:  "assistant line then the stream's block stop",
			lines: append([]string{toolUse("null", "toolu_t1", "TodoWrite", todos)}, streamed("toolu_t1", todos)...),
			want:  []string{want},
		},
		{
			name:  "empty list",
			lines: []string{toolUse("null", "toolu_t1", "TodoWrite", `{"todos":[]}`)},
			want:  []string{"todos (empty)"},
		},
		{
			name:  "no todos",
			lines: []string{toolUse("null", "toolu_t1", "TodoWrite", `{}`), toolUse("null", "toolu_t2", "TodoWrite", `{"todos":"x"}`)},
		},
		{
			name:  "subagent list",
			lines: []string{toolUse(`"toolu_agent"`, "toolu_t1", "TodoWrite", todos)},
			want:  []string{"[sub toolu_agent] " + want},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := only(translate(t, newTranslator(), tt.lines...), "todos", "[sub toolu_agent] todos")
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestTaskChecklist(t *testing.T) {
	create := func(id, subject string) string {
		return toolUse("null", id, "TaskCreate", fmt.Sprintf(`{"subject":%q,"description":"d","activeForm":"doing"}`, subject))
	}
	update := func(id, input string) string { return toolUse("null", id, "TaskUpdate", input) }
	tests := []struct {
		name  string
		lines []string
		want  []string
	}{
		{
			// No tool_use_result: ids are assigned in creation order, as
			// Claude Code does.
			name: "ids in creation order",
			lines: []string{
				create("c1", "A"), toolResult("c1", "Task #1 created successfully: A", false, ""),
				create("c2", "B"), toolResult("c2", "Task #2 created successfully: B", false, ""),
			},
			want: []string{
				`todos [1 PENDING "A" active="doing" desc="d"]`,
				`todos [1 PENDING "A" active="doing" desc="d"] [2 PENDING "B" active="doing" desc="d"]`,
			},
		},
		{
			// The result's id wins and moves the counter past it.
			name: "id from the result",
			lines: []string{
				create("c1", "A"), toolResult("c1", "ok", false, `{"task":{"id":"7","subject":"A"}}`),
				create("c2", "B"), toolResult("c2", "ok", false, ""),
			},
			want: []string{
				`todos [7 PENDING "A" active="doing" desc="d"]`,
				`todos [7 PENDING "A" active="doing" desc="d"] [8 PENDING "B" active="doing" desc="d"]`,
			},
		},
		{
			name: "failed calls change nothing",
			lines: []string{
				create("c1", "A"), toolResult("c1", "<tool_use_error>boom</tool_use_error>", true, `"Error: boom"`),
				create("c2", "B"), toolResult("c2", "ok", false, `{"task":{"id":"1","subject":"B"}}`),
				update("u1", `{"taskId":"1","status":"completed"}`), toolResult("u1", "failed", true, ""),
				update("u2", `{"taskId":"1","status":"completed"}`), toolResult("u2", "Task not found", false, `{"success":false,"taskId":"1","updatedFields":[],"error":"Task not found"}`),
			},
			want: []string{`todos [1 PENDING "B" active="doing" desc="d"]`},
		},
		{
			name: "updates that change nothing",
			lines: []string{
				create("c1", "A"), toolResult("c1", "ok", false, ""),
				update("u1", `{"taskId":"9","status":"completed"}`), toolResult("u1", "ok", false, `{"success":true,"taskId":"9","updatedFields":["status"]}`),
				update("u2", `{"taskId":"1","status":"pending","subject":"A"}`), toolResult("u2", "ok", false, `{"success":true,"taskId":"1","updatedFields":[]}`),
				update("u3", `{"taskId":"1","status":"blocked"}`), toolResult("u3", "ok", false, ""),
			},
			want: []string{`todos [1 PENDING "A" active="doing" desc="d"]`},
		},
		{
			name: "update every field then delete",
			lines: []string{
				create("c1", "A"), toolResult("c1", "ok", false, ""),
				update("u1", `{"taskId":"1","subject":"A2","description":"d2","activeForm":"doing A2","status":"in_progress","owner":"me"}`), toolResult("u1", "ok", false, `{"success":true}`),
				update("u2", `{"taskId":"1","status":"deleted"}`), toolResult("u2", "ok", false, `{"success":true}`),
				create("c2", "B"), toolResult("c2", "ok", false, ""),
			},
			want: []string{
				`todos [1 PENDING "A" active="doing" desc="d"]`,
				`todos [1 IN_PROGRESS "A2" active="doing A2" desc="d2"]`,
				`todos (empty)`,
				`todos [2 PENDING "B" active="doing" desc="d"]`, // ids are not reused
			},
		},
		{
			// A call whose result never came (interrupted) is forgotten at
			// the turn's end.
			name: "no result",
			lines: []string{
				create("c1", "A"), interruptedResult, toolResult("c1", "late", false, ""),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := only(translate(t, newTranslator(), tt.lines...), "todos")
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// Events handed out are snapshots: the translator's later changes to its
// list must not show through them (the session persists them as they are).
func TestTodoUpdateIsSnapshot(t *testing.T) {
	tr := newTranslator()
	var first *pb.TodoUpdate
	for _, l := range []string{
		toolUse("null", "c1", "TaskCreate", `{"subject":"A","description":"d"}`),
		toolResult("c1", "ok", false, ""),
		toolUse("null", "u1", "TaskUpdate", `{"taskId":"1","status":"completed","subject":"changed"}`),
		toolResult("u1", "ok", false, ""),
	} {
		for _, ev := range translateEvents(t, tr, l) {
			if u := ev.GetTodoUpdate(); u != nil && first == nil {
				first = u
			}
		}
	}
	if first == nil || len(first.Items) != 1 || first.Items[0].Subject != "A" || first.Items[0].Status != pb.TodoStatus_PENDING {
		t.Errorf("first TodoUpdate changed afterwards: %v", first)
	}
}
