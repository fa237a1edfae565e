package client

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func TestInputSummary(t *testing.T) {
	tests := []struct {
		tool  string
		input map[string]any
		desc  string
		want  string
	}{
		{"Bash", map[string]any{"command": "go test ./...", "description": "Run tests"}, "", "go test ./..."},
		{"Bash", map[string]any{"command": "echo a\necho b"}, "", "echo a …"},
		{"Read", map[string]any{"file_path": "/p/main.go", "offset": 10.0}, "", "/p/main.go"},
		{"Edit", map[string]any{"file_path": "/p/x.go", "old_string": "a", "new_string": "b"}, "", "/p/x.go"},
		{"NotebookEdit", map[string]any{"notebook_path": "/p/n.ipynb"}, "", "/p/n.ipynb"},
		{"Grep", map[string]any{"pattern": "TODO", "path": "src"}, "", "TODO in src"},
		{"Glob", map[string]any{"pattern": "**/*.go"}, "", "**/*.go"},
		{"WebFetch", map[string]any{"url": "https://go.dev", "prompt": "summarize"}, "", "https://go.dev"},
		{"ExitPlanMode", map[string]any{"plan": "1. parse\n2. test"}, "", "1. parse …"},
		{"mcp__gh__create_issue", map[string]any{"title": "Bug here", "n": 2.0, "ok": true}, "", `n=2 ok=true title="Bug here"`},
		{"Bash", map[string]any{}, "Run something", "Run something"},
		{"Unknown", nil, "", ""},
	}
	for _, tt := range tests {
		if got := InputSummary(tt.tool, tt.input, tt.desc); got != tt.want {
			t.Errorf("InputSummary(%s, %v) = %q, want %q", tt.tool, tt.input, got, tt.want)
		}
	}
}

func TestTodoList(t *testing.T) {
	items := []*pb.TodoItem{
		{Id: "1", Subject: "Write the parser", ActiveForm: "Writing the parser", Status: pb.TodoStatus_COMPLETED},
		{Id: "2", Subject: "Add tests", ActiveForm: "Adding tests", Status: pb.TodoStatus_IN_PROGRESS},
		{Id: "3", Subject: "Update docs", ActiveForm: "Updating docs", Status: pb.TodoStatus_PENDING},
		{Id: "4", Subject: "Release", Status: pb.TodoStatus_IN_PROGRESS},
		{Id: "5", Description: "only a description", Status: pb.TodoStatus_TODO_STATUS_UNSPECIFIED},
	}
	want := "☰ todos 1/5 done\n" +
		"  ☑ Write the parser\n" +
		"  ◐ Adding tests\n" +
		"  ☐ Update docs\n" +
		"  ◐ Release\n" +
		"  ☐ only a description\n"
	if got := TodoList(items); got != want {
		t.Errorf("TodoList:\n%s\nwant:\n%s", got, want)
	}
	if got := TodoList(nil); got != "☰ todos 0/0 done\n" {
		t.Errorf("empty TodoList = %q", got)
	}
}

func TestQuestionAndPlanMode(t *testing.T) {
	q := &pb.UserQuestion{Question: "Which features?", MultiSelect: true, Options: []*pb.QuestionOption{
		{Value: "Auth", Label: "Auth", Description: "Login"}, {Value: "Search", Label: "Search"}, {Value: "v"},
	}}
	want := "? Which features? (several allowed)\n  1. Auth — Login\n  2. Search\n  3. v\n"
	if got := Question(q); got != want {
		t.Errorf("Question:\n%q\nwant\n%q", got, want)
	}
	if got := PlanMode(&pb.PlanModeChange{Active: true}); got != "◇ plan mode on\n" {
		t.Errorf("plan on = %q", got)
	}
	if got := PlanMode(&pb.PlanModeChange{Plan: "1. a\n2. b\n"}); got != "◇ plan mode off\n  1. a\n  2. b\n" {
		t.Errorf("plan off = %q", got)
	}
}

func TestRendererRichEvents(t *testing.T) {
	var out, errb strings.Builder
	r := &Renderer{Out: &out, Err: &errb}
	input, _ := structpb.NewStruct(map[string]any{"todos": []any{}})
	cmd, _ := structpb.NewStruct(map[string]any{"command": "make", "description": "Build it"})
	for _, e := range []*pb.AgentEvent{
		{Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: "Planning"}}},
		{Event: &pb.AgentEvent_ToolCallStart{ToolCallStart: &pb.ToolCallStart{ToolId: "t1", ToolName: "TodoWrite", Input: input}}},
		{Event: &pb.AgentEvent_TodoUpdate{TodoUpdate: &pb.TodoUpdate{Items: []*pb.TodoItem{{Subject: "A", Status: pb.TodoStatus_PENDING}}}}},
		{Event: &pb.AgentEvent_ToolCallResult{ToolCallResult: &pb.ToolCallResult{ToolId: "t1", Output: "Todos have been modified"}}},
		{Event: &pb.AgentEvent_PermissionRequest{PermissionRequest: &pb.PermissionRequest{ToolName: "Bash", Input: cmd}}},
		{Event: &pb.AgentEvent_UserQuestion{UserQuestion: &pb.UserQuestion{Question: "Q?", Options: []*pb.QuestionOption{{Label: "x"}}}}},
		{ParentToolUseId: "agent1", Event: &pb.AgentEvent_TodoUpdate{TodoUpdate: &pb.TodoUpdate{Items: []*pb.TodoItem{{Subject: "B", Status: pb.TodoStatus_COMPLETED}}}}},
		{Event: &pb.AgentEvent_PlanMode{PlanMode: &pb.PlanModeChange{Active: true}}},
	} {
		r.Event(e)
	}
	want := "Planning\n" +
		"☰ todos 0/1 done\n  ☐ A\n" +
		"? Claude wants to use Bash: make\n  Build it\n" +
		"? Q?\n  1. x\n" +
		"    │ ☰ todos 1/1 done\n    │   ☑ B\n" +
		"◇ plan mode on\n"
	if out.String() != want {
		t.Errorf("rendered:\n%s\nwant:\n%s", out.String(), want)
	}

	out.Reset()
	r = &Renderer{Out: &out, Err: &errb, QuestionsByCaller: true}
	r.Event(&pb.AgentEvent{Event: &pb.AgentEvent_UserQuestion{UserQuestion: &pb.UserQuestion{Question: "Q?"}}})
	if out.String() != "" {
		t.Errorf("QuestionsByCaller still printed %q", out.String())
	}
}

func TestUserInput(t *testing.T) {
	tests := []struct {
		name string
		in   *pb.UserInputEvent
		want string
	}{
		{"one line", &pb.UserInputEvent{Content: "fix the build"}, "> fix the build\n"},
		{"lines", &pb.UserInputEvent{Content: "first\n\nthird\n"}, "> first\n>\n> third\n"},
		{"attachments", &pb.UserInputEvent{Content: "look", SentBy: "alice", Attachments: []*pb.AttachmentInfo{
			{Filename: "a.png", MimeType: "image/png", Size: 68},
		}}, "> look\n>   [attached a.png (image/png, 68 bytes)]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UserInput(tt.in); got != tt.want {
				t.Errorf("UserInput = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSubagentTask(t *testing.T) {
	task := func(s pb.SubagentTaskStatus, bg bool) *pb.SubagentTaskUpdate {
		return &pb.SubagentTaskUpdate{ToolUseId: "a1", TaskId: "t1", Status: s, Description: "Research OAuth", SubagentType: "general-purpose", IsBackgrounded: bg}
	}
	tests := []struct {
		name string
		u    *pb.SubagentTaskUpdate
		want string
	}{
		{"foreground start is the call's line", task(pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STARTED, false), ""},
		{"background start", task(pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STARTED, true), "◆ subagent \"Research OAuth\" started in the background\n"},
		{"progress is not shown", task(pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_RUNNING, true), ""},
		{"completed with totals", with(task(pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_COMPLETED, true), func(u *pb.SubagentTaskUpdate) {
			u.Summary, u.TotalTokens, u.ToolUses, u.DurationMs = "The report.", 32, 2, 1680
		}), "◆ subagent \"Research OAuth\" completed (32 tokens, 2 tool uses, 1.7s)\n"},
		{"failed", with(task(pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_FAILED, true), func(u *pb.SubagentTaskUpdate) {
			u.Error = "Agent terminated early due to an API error\nmore"
		}), "◆ subagent \"Research OAuth\" failed: Agent terminated early due to an API error …\n"},
		{"stopped, without a description", with(task(pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STOPPED, true), func(u *pb.SubagentTaskUpdate) {
			u.Description = ""
		}), "◆ subagent \"general-purpose\" stopped\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SubagentTask(tt.u); got != tt.want {
				t.Errorf("SubagentTask = %q, want %q", got, tt.want)
			}
		})
	}

	// A nested subagent's end is indented like the events of the subagent
	// that started it.
	var out strings.Builder
	r := &Renderer{Out: &out, Err: &out}
	r.Event(&pb.AgentEvent{Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: "Working"}}})
	r.Event(&pb.AgentEvent{ParentToolUseId: "a0", Event: &pb.AgentEvent_SubagentTask{SubagentTask: task(pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STOPPED, false)}})
	if want := "Working\n    │ ◆ subagent \"Research OAuth\" stopped\n"; out.String() != want {
		t.Errorf("rendered %q, want %q", out.String(), want)
	}
}

func with[T any](v T, f func(T)) T { f(v); return v }
