package bridge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/betcode-dev/betcode/agent/claude"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the translator's output")

// fakeClock advances by step on every call, so a tool's duration is step
// times the number of clock reads between its start and its result.
type fakeClock struct {
	t    time.Time
	step time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.t = c.t.Add(c.step)
	return c.t
}

func newTranslator() *Translator {
	clk := &fakeClock{t: time.Date(2026, 11, 21, 19, 3, 7, 0, time.UTC), step: 7 * time.Millisecond}
	return New(clk.Now)
}

// fed is one transcript line and the events it produced.
type fed struct {
	file string
	line int
	raw  []byte
	evs  []*pb.AgentEvent
}

func readLines(t testing.TB, file string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// feed runs the transcripts, in order, through one translator.
func feed(t *testing.T, tr *Translator, files ...string) []fed {
	t.Helper()
	var out []fed
	for _, f := range files {
		for i, raw := range readLines(t, f) {
			if len(bytes.TrimSpace(raw)) == 0 {
				continue
			}
			env, err := claude.DecodeLine(raw)
			if err != nil {
				t.Fatalf("%s:%d: %v", f, i+1, err)
			}
			out = append(out, fed{file: f, line: i + 1, raw: raw, evs: tr.Translate(env)})
		}
	}
	return out
}

func allEvents(steps []fed) []*pb.AgentEvent {
	var evs []*pb.AgentEvent
	for _, s := range steps {
		evs = append(evs, s.evs...)
	}
	return evs
}

// describe renders an event in the compact form the goldens use.
func describe(ev *pb.AgentEvent) string {
	var b strings.Builder
	if ev.ParentToolUseId != "" {
		fmt.Fprintf(&b, "[sub %s] ", ev.ParentToolUseId)
	}
	switch e := ev.Event.(type) {
	case *pb.AgentEvent_TextDelta:
		switch d := e.TextDelta; {
		case d.Text == "" && d.IsComplete:
			b.WriteString("text-complete")
		case d.IsComplete:
			fmt.Fprintf(&b, "text %q complete", d.Text)
		default:
			fmt.Fprintf(&b, "text %q", d.Text)
		}
	case *pb.AgentEvent_ToolCallStart:
		s := e.ToolCallStart
		fmt.Fprintf(&b, "tool_start %s %s desc=%q input=%s", s.ToolId, s.ToolName, s.Description, structJSON(s.Input))
	case *pb.AgentEvent_ToolCallResult:
		r := e.ToolCallResult
		fmt.Fprintf(&b, "tool_result %s err=%t dur=%dms output=%q", r.ToolId, r.IsError, r.DurationMs, r.Output)
	case *pb.AgentEvent_PermissionRequest:
		p := e.PermissionRequest
		fmt.Fprintf(&b, "permission %s %s desc=%q input=%s", p.RequestId, p.ToolName, p.Description, structJSON(p.Input))
		if p.ToolUseId != "" {
			fmt.Fprintf(&b, " tool_use=%s", p.ToolUseId)
		}
		for _, s := range p.Suggestions {
			fmt.Fprintf(&b, " suggest=%s", structJSON(s))
		}
	case *pb.AgentEvent_UserQuestion:
		q := e.UserQuestion
		fmt.Fprintf(&b, "question %s multi=%t %q", q.QuestionId, q.MultiSelect, q.Question)
		for _, o := range q.Options {
			fmt.Fprintf(&b, " [%s|%s|%s]", o.Value, o.Label, o.Description)
		}
	case *pb.AgentEvent_TodoUpdate:
		b.WriteString("todos")
		if len(e.TodoUpdate.Items) == 0 {
			b.WriteString(" (empty)")
		}
		for _, it := range e.TodoUpdate.Items {
			fmt.Fprintf(&b, " [%s %s %q", it.Id, it.Status, it.Subject)
			if it.ActiveForm != "" {
				fmt.Fprintf(&b, " active=%q", it.ActiveForm)
			}
			if it.Description != "" {
				fmt.Fprintf(&b, " desc=%q", it.Description)
			}
			b.WriteString("]")
		}
	case *pb.AgentEvent_PlanMode:
		fmt.Fprintf(&b, "plan_mode active=%t plan=%q", e.PlanMode.Active, e.PlanMode.Plan)
	case *pb.AgentEvent_StatusChange:
		fmt.Fprintf(&b, "status %s", e.StatusChange.Status)
		if e.StatusChange.Message != "" {
			fmt.Fprintf(&b, " %q", e.StatusChange.Message)
		}
	case *pb.AgentEvent_Error:
		fmt.Fprintf(&b, "error %s fatal=%t %q", e.Error.Code, e.Error.IsFatal, e.Error.Message)
	case *pb.AgentEvent_Usage:
		u := e.Usage
		fmt.Fprintf(&b, "usage in=%d out=%d cache_read=%d cache_write=%d cost=%s model=%s dur=%dms",
			u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheCreationTokens,
			strconv.FormatFloat(u.CostUsd, 'g', 6, 64), u.Model, u.DurationMs)
	case *pb.AgentEvent_TurnComplete:
		fmt.Fprintf(&b, "turn_complete %s", e.TurnComplete.StopReason)
	case *pb.AgentEvent_SubagentTask:
		u := e.SubagentTask
		fmt.Fprintf(&b, "subagent_task %s %s %s bg=%t desc=%q type=%s", u.ToolUseId, u.TaskId,
			strings.TrimPrefix(u.Status.String(), "SUBAGENT_TASK_STATUS_"), u.IsBackgrounded, u.Description, u.SubagentType)
		if u.Activity != "" || u.LastToolName != "" {
			fmt.Fprintf(&b, " activity=%q last_tool=%s", u.Activity, u.LastToolName)
		}
		if u.Summary != "" {
			fmt.Fprintf(&b, " summary=%q", u.Summary)
		}
		if u.Error != "" {
			fmt.Fprintf(&b, " error=%q", u.Error)
		}
		if u.TotalTokens != 0 || u.ToolUses != 0 || u.DurationMs != 0 {
			fmt.Fprintf(&b, " tokens=%d tools=%d dur=%dms", u.TotalTokens, u.ToolUses, u.DurationMs)
		}
	default:
		fmt.Fprintf(&b, "other %T", ev.Event)
	}
	return b.String()
}

func describeAll(evs []*pb.AgentEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = describe(ev)
	}
	return out
}

func structJSON(st *structpb.Struct) string {
	if st == nil {
		return "<nil>"
	}
	m := st.AsMap()
	var b bytes.Buffer
	enc := json.NewEncoder(&b) // map keys come out sorted
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return "<" + err.Error() + ">"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// render is the golden form of a run: a header per transcript, then each
// event prefixed by the number of the line that produced it.
func render(steps []fed) string {
	var b strings.Builder
	file := ""
	for _, s := range steps {
		if s.file != file {
			file = s.file
			fmt.Fprintf(&b, "# %s\n", file)
		}
		for _, ev := range s.evs {
			fmt.Fprintf(&b, "%d: %s\n", s.line, describe(ev))
		}
	}
	return b.String()
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got == string(want) {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Errorf("%s: first difference at line %d:\n got: %s\nwant: %s", path, i+1, gl, wl)
			break
		}
	}
	t.Errorf("%s: full output:\n%s", path, got)
}

// line is the subset of a CLI line the invariant checks read, decoded
// independently of the translator.
type line struct {
	Type              string          `json:"type"`
	Subtype           string          `json:"subtype"`
	ParentToolUseID   *string         `json:"parent_tool_use_id"`
	IsAPIErrorMessage bool            `json:"is_api_error_message"`
	Message           json.RawMessage `json:"message"` // an object, or a string on system/permission_denied
	RequestID         string          `json:"request_id"`
	Request           struct {
		Subtype               string            `json:"subtype"`
		AgentID               string            `json:"agent_id"`
		ToolName              string            `json:"tool_name"`
		Input                 json.RawMessage   `json:"input"`
		ToolUseID             string            `json:"tool_use_id"`
		PermissionSuggestions []json.RawMessage `json:"permission_suggestions"`
	} `json:"request"`
	TaskID         string          `json:"task_id"`
	ToolUseID      string          `json:"tool_use_id"`
	TaskType       string          `json:"task_type"`
	ParentTaskID   string          `json:"parent_task_id"`
	Status         *string         `json:"status"`
	PermissionMode string          `json:"permissionMode"`
	ToolUseResult  json.RawMessage `json:"tool_use_result"`

	IsError        bool   `json:"is_error"`
	APIErrorStatus *int   `json:"api_error_status"`
	TerminalReason string `json:"terminal_reason"`
	Usage          struct {
		InputTokens  uint32 `json:"input_tokens"`
		OutputTokens uint32 `json:"output_tokens"`
	} `json:"usage"`
	SinceLast map[string]struct {
		CostUSD float64 `json:"costUSD"`
	} `json:"model_usage_since_last_result"`
}

type lineBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (l *line) blocks() []lineBlock {
	var m struct {
		Content json.RawMessage `json:"content"`
	}
	var bs []lineBlock
	if json.Unmarshal(l.Message, &m) == nil && len(m.Content) > 0 && m.Content[0] == '[' {
		_ = json.Unmarshal(m.Content, &bs)
	}
	return bs
}

func (l *line) parent() string {
	if l.ParentToolUseID == nil {
		return ""
	}
	return *l.ParentToolUseID
}

// checkInvariants asserts what the spec requires of any transcript, using
// the CLI lines as the oracle.
func checkInvariants(t *testing.T, steps []fed) {
	t.Helper()
	evs := allEvents(steps)
	for _, ev := range evs {
		if ev.Event == nil {
			t.Errorf("event with no payload: %v", ev)
		}
		if _, err := proto.Marshal(ev); err != nil {
			t.Errorf("event does not marshal: %v: %v", describe(ev), err)
		}
		if ev.Sequence != 0 || ev.Timestamp != nil {
			t.Errorf("translator set sequence/timestamp: %v", describe(ev))
		}
	}

	starts := map[string][]*pb.ToolCallStart{}
	startPos := map[string]int{}
	results := map[string][]*pb.ToolCallResult{}
	resultPos := map[string]int{}
	for i, ev := range evs {
		if s := ev.GetToolCallStart(); s != nil {
			starts[s.ToolId] = append(starts[s.ToolId], s)
			startPos[s.ToolId] = i
		}
		if r := ev.GetToolCallResult(); r != nil {
			results[r.ToolId] = append(results[r.ToolId], r)
			resultPos[r.ToolId] = i
		}
	}

	agents := map[string]string{}   // task_id -> Agent tool_use id
	tasks := map[string]*testTask{} // subagent tasks by task_id
	calls := map[string]lineBlock{} // tool_use id -> its block
	plan, planChanges := false, 0
	var wantText, gotText = map[string][]string{}, map[string][]string{}
	results0 := 0
	for _, s := range steps {
		var l line
		if err := json.Unmarshal(s.raw, &l); err != nil {
			t.Fatalf("%s:%d: %v", s.file, s.line, err)
		}
		where := fmt.Sprintf("%s:%d", s.file, s.line)

		// Everything a subagent line produces is attributed to its Agent call.
		if p := l.parent(); p != "" {
			for _, ev := range s.evs {
				if ev.ParentToolUseId != p {
					t.Errorf("%s: %s: parent_tool_use_id = %q, want %q", where, describe(ev), ev.ParentToolUseId, p)
				}
			}
		}
		switch {
		case l.Type == "system" && strings.HasPrefix(l.Subtype, "task_"):
			checkTask(t, where, &l, tasks, agents, s.evs)
			if l.Subtype == "task_started" {
				agents[l.TaskID] = l.ToolUseID
			}
		case l.Type == "control_request" && l.Request.Subtype == "can_use_tool":
			checkCanUseTool(t, where, &l, agents[l.Request.AgentID], s.evs)
		case l.Type == "system" && (l.Subtype == "init" || l.Subtype == "status") && l.PermissionMode != "":
			if p := l.PermissionMode == "plan"; p != plan {
				plan = p
				planChanges++
			}
		case l.Type == "assistant":
			for _, b := range l.blocks() {
				switch b.Type {
				case "tool_use":
					got := starts[b.ID]
					if len(got) != 1 {
						t.Errorf("%s: %d ToolCallStart for %s, want exactly 1", where, len(got), b.ID)
						continue
					}
					var want map[string]any
					if err := json.Unmarshal(b.Input, &want); err != nil {
						t.Fatal(err)
					}
					if got[0].ToolName != b.Name || !reflect.DeepEqual(got[0].Input.AsMap(), want) {
						t.Errorf("%s: ToolCallStart %s %s input %v, want %s input %v", where, b.ID, got[0].ToolName, got[0].Input.AsMap(), b.Name, want)
					}
					calls[b.ID] = b
					if b.Name == "TodoWrite" {
						checkTodoWrite(t, where, b.Input, s.evs)
					}
				case "text":
					if !l.IsAPIErrorMessage {
						wantText[l.parent()] = append(wantText[l.parent()], b.Text)
					}
				}
			}
		case l.Type == "user":
			for _, b := range l.blocks() {
				if b.Type != "tool_result" {
					continue
				}
				got := results[b.ToolUseID]
				if len(got) != 1 {
					t.Errorf("%s: %d ToolCallResult for %s, want exactly 1", where, len(got), b.ToolUseID)
					continue
				}
				if got[0].IsError != b.IsError || got[0].Output != claude.ToolResultText(b.Content) {
					t.Errorf("%s: ToolCallResult %s err=%t output %q, want err=%t output %q", where, b.ToolUseID, got[0].IsError, got[0].Output, b.IsError, claude.ToolResultText(b.Content))
				}
				if _, ok := startPos[b.ToolUseID]; !ok || startPos[b.ToolUseID] > resultPos[b.ToolUseID] {
					t.Errorf("%s: ToolCallResult %s without an earlier ToolCallStart", where, b.ToolUseID)
				}
				if c := calls[b.ToolUseID]; (c.Name == "TaskCreate" || c.Name == "TaskUpdate") && !b.IsError {
					checkTaskResult(t, where, c, l.ToolUseResult, s.evs)
				}
			}
		case l.Type == "result":
			results0++
			checkResult(t, where, &l, s.evs)
		}
	}

	// Every entry into or out of plan mode the CLI reported is announced
	// once (an exit may wait for ExitPlanMode's result, at the latest for
	// the turn's result), alternating, starting with an entry.
	var planEvs []bool
	for _, ev := range evs {
		if p := ev.GetPlanMode(); p != nil {
			if p.Active == (len(planEvs)%2 == 1) {
				t.Errorf("PlanModeChange #%d active=%t does not alternate", len(planEvs)+1, p.Active)
			}
			planEvs = append(planEvs, p.Active)
		}
		if u := ev.GetTodoUpdate(); u != nil {
			seen := map[string]bool{}
			for _, it := range u.Items {
				if it.Id == "" || seen[it.Id] {
					t.Errorf("TodoUpdate %s: empty or repeated id %q", describe(ev), it.Id)
				}
				seen[it.Id] = true
			}
		}
	}
	if len(planEvs) != planChanges {
		t.Errorf("%d PlanModeChange for %d plan mode changes in the transcript", len(planEvs), planChanges)
	}

	// TextDeltas, cut into blocks at is_complete, must join to the
	// assistant lines' text blocks, per thread.
	cur := map[string]*strings.Builder{}
	for _, ev := range evs {
		d := ev.GetTextDelta()
		if d == nil {
			continue
		}
		p := ev.ParentToolUseId
		if cur[p] == nil {
			cur[p] = &strings.Builder{}
		}
		cur[p].WriteString(d.Text)
		if d.IsComplete {
			gotText[p] = append(gotText[p], cur[p].String())
			cur[p].Reset()
		}
	}
	for p, b := range cur {
		if b.Len() > 0 {
			t.Errorf("thread %q: text %q never completed", p, b.String())
		}
	}
	for _, p := range keysOf(wantText, gotText) {
		if !reflect.DeepEqual(gotText[p], wantText[p]) {
			t.Errorf("thread %q: text blocks %q, want %q", p, gotText[p], wantText[p])
		}
	}

	var turns int
	for i, ev := range evs {
		if ev.GetTurnComplete() == nil {
			continue
		}
		turns++
		if i+1 >= len(evs) || evs[i+1].GetStatusChange().GetStatus() != pb.AgentStatus_IDLE {
			t.Errorf("TurnComplete #%d is not followed by StatusChange IDLE", turns)
		}
	}
	if turns != results0 {
		t.Errorf("%d TurnComplete for %d result lines", turns, results0)
	}
}

// testTask is a subagent task as checkTask follows it.
type testTask struct {
	toolUseID, parent string
	ended             bool
}

// checkTask checks the events of a task_* line: a subagent's task_started
// gives one STARTED, its task_notification one final update, its other
// lines at most one non-final update; all name the task and its Agent
// call and carry the parent_tool_use_id of the thread that made the call.
// Lines of other tasks (or of an ended one) give nothing.
func checkTask(t *testing.T, where string, l *line, tasks map[string]*testTask, agents map[string]string, evs []*pb.AgentEvent) {
	t.Helper()
	if l.Subtype == "task_started" && l.TaskType == "local_agent" && l.ToolUseID != "" {
		tasks[l.TaskID] = &testTask{toolUseID: l.ToolUseID, parent: agents[l.ParentTaskID]}
	}
	tk := tasks[l.TaskID]
	if tk == nil || tk.ended {
		if len(evs) != 0 {
			t.Errorf("%s: %s of an unknown or ended task gave %v", where, l.Subtype, describeAll(evs))
		}
		return
	}
	want := map[string]int{"task_started": 1, "task_notification": 1}[l.Subtype]
	if len(evs) > 1 || len(evs) < want {
		t.Errorf("%s: %s gave %v, want %d SubagentTaskUpdate", where, l.Subtype, describeAll(evs), max(want, 1))
		return
	}
	for _, ev := range evs {
		u := ev.GetSubagentTask()
		if u == nil || u.TaskId != l.TaskID || u.ToolUseId != tk.toolUseID || ev.ParentToolUseId != tk.parent {
			t.Errorf("%s: %s gave %s, want a SubagentTaskUpdate of task %s, call %s, parent %q", where, l.Subtype, describe(ev), l.TaskID, tk.toolUseID, tk.parent)
			continue
		}
		final := u.Status == pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_COMPLETED || u.Status == pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_FAILED ||
			u.Status == pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STOPPED
		switch {
		case l.Subtype == "task_started" && u.Status != pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_STARTED,
			l.Subtype == "task_notification" && (!final || l.Status == nil || !strings.EqualFold(*l.Status, strings.TrimPrefix(u.Status.String(), "SUBAGENT_TASK_STATUS_"))),
			l.Subtype != "task_notification" && final:
			t.Errorf("%s: %s gave %s", where, l.Subtype, describe(ev))
		}
		tk.ended = final
	}
}

// checkResult checks the events of one result line: an ErrorEvent exactly
// when is_error, then UsageReport, TurnComplete, StatusChange IDLE.
func checkResult(t *testing.T, where string, l *line, evs []*pb.AgentEvent) {
	t.Helper()
	var kinds []string
	var errEv *pb.ErrorEvent
	var usage *pb.UsageReport
	var tc *pb.TurnComplete
	for _, ev := range evs {
		switch {
		case ev.GetError() != nil:
			errEv = ev.GetError()
			kinds = append(kinds, "error")
		case ev.GetUsage() != nil:
			usage = ev.GetUsage()
			kinds = append(kinds, "usage")
		case ev.GetTurnComplete() != nil:
			tc = ev.GetTurnComplete()
			kinds = append(kinds, "turn_complete")
		case ev.GetStatusChange() != nil:
			kinds = append(kinds, "status")
		case ev.GetTextDelta() != nil:
			// closing a text block an interrupt left open; not a result event
		case ev.GetPlanMode() != nil:
			// a plan mode exit that waited for a tool result that never came
		default:
			kinds = append(kinds, describe(ev))
		}
	}
	want := "usage turn_complete status"
	if l.IsError {
		want = "error " + want
	}
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("%s: result gave %v, want %s", where, describeAll(evs), want)
	}
	if l.IsError {
		code := CodeAgentError
		if l.APIErrorStatus != nil && *l.APIErrorStatus == 429 {
			code = CodeRateLimited
		}
		if errEv.Code != code || errEv.Message == "" || errEv.IsFatal {
			t.Errorf("%s: error %v, want code %s, a message, not fatal", where, errEv, code)
		}
	}
	var cost float64
	for _, m := range l.SinceLast {
		cost += m.CostUSD
	}
	if usage.InputTokens != l.Usage.InputTokens || usage.OutputTokens != l.Usage.OutputTokens || usage.CostUsd != cost {
		t.Errorf("%s: usage in=%d out=%d cost=%v, want in=%d out=%d cost=%v", where,
			usage.InputTokens, usage.OutputTokens, usage.CostUsd, l.Usage.InputTokens, l.Usage.OutputTokens, cost)
	}
	if strings.HasPrefix(l.TerminalReason, "aborted_") && tc.StopReason != "cancelled" {
		t.Errorf("%s: interrupted turn stop_reason = %q, want cancelled", where, tc.StopReason)
	}
}

// checkCanUseTool checks the events of a can_use_tool line: UserQuestions
// for AskUserQuestion (one per question, all with the request id), a
// PermissionRequest carrying the suggestions and tool id otherwise; the
// request's events attributed to the subagent's Agent call; then WAITING_FOR_USER.
func checkCanUseTool(t *testing.T, where string, l *line, parent string, evs []*pb.AgentEvent) {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].GetStatusChange().GetStatus() != pb.AgentStatus_WAITING_FOR_USER {
		t.Errorf("%s: can_use_tool gave %v, want StatusChange WAITING_FOR_USER last", where, describeAll(evs))
		return
	}
	var ask askInput
	_ = json.Unmarshal(l.Request.Input, &ask)
	if l.Request.ToolName == "AskUserQuestion" && len(ask.Questions) > 0 {
		if len(evs) != len(ask.Questions)+1 {
			t.Errorf("%s: AskUserQuestion gave %v, want %d UserQuestion then a status", where, describeAll(evs), len(ask.Questions))
			return
		}
		for i, q := range ask.Questions {
			uq := evs[i].GetUserQuestion()
			if uq == nil || uq.QuestionId != l.RequestID || uq.Question != q.Question || uq.MultiSelect != q.MultiSelect || len(uq.Options) != len(q.Options) {
				t.Errorf("%s: question %d = %s, want id %s %q multi=%t with %d options", where, i, describe(evs[i]), l.RequestID, q.Question, q.MultiSelect, len(q.Options))
				continue
			}
			for j, o := range q.Options {
				if got := uq.Options[j]; got.Value != o.Label || got.Label != o.Label || got.Description != o.Description {
					t.Errorf("%s: question %d option %d = %v, want %v", where, i, j, got, o)
				}
			}
			if evs[i].ParentToolUseId != parent {
				t.Errorf("%s: question parent = %q, want %q", where, evs[i].ParentToolUseId, parent)
			}
		}
		return
	}
	p := evs[0].GetPermissionRequest()
	if p == nil {
		t.Errorf("%s: can_use_tool gave %v, want a PermissionRequest first", where, describeAll(evs))
		return
	}
	if p.RequestId != l.RequestID || p.ToolName != l.Request.ToolName || p.ToolUseId != l.Request.ToolUseID {
		t.Errorf("%s: %s, want request %s tool %s tool_use %s", where, describe(evs[0]), l.RequestID, l.Request.ToolName, l.Request.ToolUseID)
	}
	if len(p.Suggestions) != len(l.Request.PermissionSuggestions) {
		t.Errorf("%s: %d suggestions, want %d", where, len(p.Suggestions), len(l.Request.PermissionSuggestions))
	} else {
		for i, raw := range l.Request.PermissionSuggestions {
			var want map[string]any
			_ = json.Unmarshal(raw, &want)
			if got := p.Suggestions[i].AsMap(); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: suggestion %d = %v, want %v", where, i, got, want)
			}
		}
	}
	if evs[0].ParentToolUseId != parent {
		t.Errorf("%s: permission parent = %q, want %q", where, evs[0].ParentToolUseId, parent)
	}
}

// checkTodoWrite checks that a TodoWrite block gave one TodoUpdate with
// its whole list, numbered from 1.
func checkTodoWrite(t *testing.T, where string, input json.RawMessage, evs []*pb.AgentEvent) {
	t.Helper()
	var in struct {
		Todos []struct{ Content, Status, ActiveForm string }
	}
	if err := json.Unmarshal(input, &in); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, td := range in.Todos {
		want = append(want, fmt.Sprintf("%d %s %s %s", i+1, td.Content, td.ActiveForm, strings.ToUpper(td.Status)))
	}
	var ups [][]string
	for _, ev := range evs {
		if u := ev.GetTodoUpdate(); u != nil {
			var got []string
			for _, it := range u.Items {
				got = append(got, fmt.Sprintf("%s %s %s %s", it.Id, it.Subject, it.ActiveForm, it.Status))
			}
			ups = append(ups, got)
		}
	}
	if len(ups) != 1 || !reflect.DeepEqual(ups[0], want) {
		t.Errorf("%s: TodoWrite gave TodoUpdates %q, want one with %q", where, ups, want)
	}
}

// checkTaskResult checks the TodoUpdate a successful Task* result gives:
// a created task is in the list, pending, with its subject; an updated one
// has the new status; a deleted one is gone.
func checkTaskResult(t *testing.T, where string, c lineBlock, result json.RawMessage, evs []*pb.AgentEvent) {
	t.Helper()
	var ups []*pb.TodoUpdate
	for _, ev := range evs {
		if u := ev.GetTodoUpdate(); u != nil {
			ups = append(ups, u)
		}
	}
	if len(ups) > 1 {
		t.Errorf("%s: %d TodoUpdates for one %s", where, len(ups), c.Name)
		return
	}
	var in struct {
		TaskID  string `json:"taskId"`
		Subject string `json:"subject"`
		Status  string `json:"status"`
	}
	_ = json.Unmarshal(c.Input, &in)
	switch c.Name {
	case "TaskCreate":
		var out struct{ Task struct{ ID string } }
		_ = json.Unmarshal(result, &out)
		if len(ups) != 1 || !slices.ContainsFunc(ups[0].Items, func(it *pb.TodoItem) bool {
			return it.Subject == in.Subject && it.Status == pb.TodoStatus_PENDING && (out.Task.ID == "" || it.Id == out.Task.ID)
		}) {
			t.Errorf("%s: TaskCreate %q gave %v, want it in the list as pending", where, in.Subject, describeAll(evs))
		}
	case "TaskUpdate":
		if len(ups) == 0 {
			return // nothing changed
		}
		i := slices.IndexFunc(ups[0].Items, func(it *pb.TodoItem) bool { return it.Id == in.TaskID })
		switch {
		case in.Status == "deleted" && i >= 0:
			t.Errorf("%s: deleted task %s still listed", where, in.TaskID)
		case in.Status != "deleted" && i < 0:
			t.Errorf("%s: updated task %s not listed", where, in.TaskID)
		case in.Status != "" && in.Status != "deleted" && ups[0].Items[i].Status.String() != strings.ToUpper(in.Status):
			t.Errorf("%s: task %s status %s, want %s", where, in.TaskID, ups[0].Items[i].Status, in.Status)
		}
	}
}

func keysOf[V any](ms ...map[string]V) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

// find returns the events matching prefix (in describe form).
func find(evs []*pb.AgentEvent, prefix string) []string {
	var out []string
	for _, ev := range evs {
		if d := describe(ev); strings.HasPrefix(d, prefix) {
			out = append(out, d)
		}
	}
	return out
}

func TestTranscripts(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		check func(t *testing.T, evs []*pb.AgentEvent)
	}{
		{
			name:  "text_turn",
			files: []string{"text_turn.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				want := []string{
					"status THINKING",
					`text "Hello"`, `text " from"`, `text " the fake"`, `text " model."`,
					"text-complete",
					"usage in=12 out=20 cache_read=0 cache_write=0 cost=0.000448 model=claude-opus-5-5 dur=58ms",
					"turn_complete end_turn",
					"status IDLE",
				}
				if got := describeAll(evs); !reflect.DeepEqual(got, want) {
					t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			},
		},
		{
			name:  "tool_turn",
			files: []string{"tool_turn.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				want := []string{
					`tool_start toolu_fake_002_0 Bash desc="Create a file" input={"command":"touch created-by-tool.txt && echo done","description":"Create a file"}`,
					`permission 6285d0ca-180e-4b74-b7a8-aa8391ef0606 Bash desc="Create a file" input={"command":"touch created-by-tool.txt && echo done","description":"Create a file"} tool_use=toolu_fake_002_0` +
						` suggest={"behavior":"allow","destination":"localSettings","rules":[{"ruleContent":"touch created-by-tool.txt && echo done","toolName":"Bash"}],"type":"addRules"}` +
						` suggest={"destination":"session","directories":["/home/dev/proj-uoqv5z_v"],"type":"addDirectories"}` +
						` suggest={"destination":"session","mode":"acceptEdits","type":"setMode"}`,
					`tool_result toolu_fake_002_0 err=false dur=7ms output="done"`,
					"usage in=24 out=40 cache_read=0 cache_write=0 cost=0.000896 model=claude-opus-5-5 dur=87ms",
				}
				var got []string
				for _, p := range []string{"tool_start", "permission", "tool_result", "usage"} {
					got = append(got, find(evs, p)...)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			},
		},
		{
			// Turn 2 of the same session: state (tools announced, streamed
			// flag, status) carries over correctly between turns.
			name:  "two_turns",
			files: []string{"text_turn.jsonl", "tool_turn.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				if n := len(find(evs, "turn_complete end_turn")); n != 2 {
					t.Errorf("%d TurnComplete end_turn, want 2", n)
				}
				if n := len(find(evs, "status THINKING")); n < 2 {
					t.Errorf("%d StatusChange THINKING, want one per turn at least", n)
				}
			},
		},
		{
			name:  "thinking_turn",
			files: []string{"thinking_turn.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				// Thinking is not text: only the answer's text block is streamed.
				if got := find(evs, "text"); !reflect.DeepEqual(got, []string{`text "Thought it"`, `text " through."`, "text-complete"}) {
					t.Errorf("text events = %q", got)
				}
			},
		},
		{
			name:  "subagent_turn",
			files: []string{"subagent_turn.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				const agent = "toolu_fake_019_0"
				want := []string{
					`[sub toolu_fake_019_0] tool_start toolu_fake_020_0 Bash`,
					`[sub toolu_fake_019_0] permission 91b096e8-c138-41f5-a715-e7136191be6e Bash`,
					`[sub toolu_fake_019_0] tool_result toolu_fake_020_0 err=false dur=7ms output="done"`,
					`[sub toolu_fake_019_0] text "Tool result received: done" complete`,
				}
				got := find(evs, "[sub "+agent+"] ")
				var filtered []string
				for _, g := range got {
					if !strings.Contains(g, "] status ") {
						filtered = append(filtered, g)
					}
				}
				if len(filtered) != len(want) {
					t.Fatalf("subagent events:\n%s\nwant prefixes:\n%s", strings.Join(filtered, "\n"), strings.Join(want, "\n"))
				}
				for i := range want {
					if !strings.HasPrefix(filtered[i], want[i]) {
						t.Errorf("subagent event %d = %s, want prefix %s", i, filtered[i], want[i])
					}
				}
				// The Agent call's own start and result are main-thread events;
				// its duration spans the subagent's clock reads.
				if got := find(evs, "tool_result "+agent); len(got) != 1 || !strings.Contains(got[0], "dur=21ms") {
					t.Errorf("Agent result = %q, want one with dur=21ms", got)
				}
				// After the subagent's permission is answered and its tool ran,
				// the session must not still claim to wait for the user.
				var last pb.AgentStatus
				for _, ev := range evs {
					if s := ev.GetStatusChange(); s != nil {
						last = s.Status
					}
					if d := ev.GetTextDelta(); d != nil && ev.ParentToolUseId == agent && last != pb.AgentStatus_EXECUTING_TOOL {
						t.Errorf("status is %s while the subagent works after its tool ran, want EXECUTING_TOOL", last)
					}
				}
			},
		},
		{
			// Claude Code 2.1.328, against the fake API: a background
			// subagent (the Agent call without run_in_background) runs a
			// tool after a permission prompt, after its parent's turn ended,
			// and reports back; Claude Code then starts a turn of its own.
			name:  "subagent_background",
			files: []string{"subagent_background.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				checkSubagentTasks(t, evs, []string{
					`subagent_task toolu_fake_001_0 a8b10520c6dcec89d STARTED bg=true desc="Research OAuth" type=general-purpose`,
					`subagent_task toolu_fake_001_0 a8b10520c6dcec89d RUNNING bg=true desc="Research OAuth" type=general-purpose activity="Running Create a file" last_tool=Bash tokens=20 tools=1 dur=147ms`,
					`subagent_task toolu_fake_001_0 a8b10520c6dcec89d COMPLETED bg=true desc="Research OAuth" type=general-purpose summary="Tool result received: done" tokens=32 tools=1 dur=867ms`,
				})
				// The call's own result came long before: it only says that
				// the subagent started.
				if got := find(evs, "tool_result toolu_fake_001_0"); len(got) != 1 || !strings.Contains(got[0], `output="Async agent launched`) {
					t.Errorf("Agent result = %q", got)
				}
			},
		},
		{
			// A background subagent whose model call fails (HTTP 400): its
			// task_updated patch carries the error, its task_notification
			// says failed.
			name:  "subagent_failed",
			files: []string{"subagent_failed.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				const apiErr = `Agent terminated early due to an API error: API Error: 400 Bad request (fake) (error type unknown, HTTP 400, request id req_fake_008, model sent to the API: claude-opus-5-5)`
				checkSubagentTasks(t, evs, []string{
					`subagent_task toolu_fake_001_0 af0b35cf43c0d5ad9 STARTED bg=true desc="Research OAuth" type=general-purpose`,
					`subagent_task toolu_fake_001_0 af0b35cf43c0d5ad9 FAILED bg=true desc="Research OAuth" type=general-purpose summary="` + apiErr + `" error="` + apiErr + `"`,
				})
			},
		},
		{
			// A background subagent stopped by the host's stop_task while
			// its model call stalls: "killed" in task_updated, "stopped" in
			// task_notification, whose summary is the task's description.
			name:  "subagent_stopped",
			files: []string{"subagent_stopped.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				checkSubagentTasks(t, evs, []string{
					`subagent_task toolu_fake_001_0 ad70fff526dba5def STARTED bg=true desc="Research OAuth" type=general-purpose`,
					`subagent_task toolu_fake_001_0 ad70fff526dba5def STOPPED bg=true desc="Research OAuth" type=general-purpose summary="Research OAuth"`,
				})
			},
		},
		{
			// A background subagent that starts a foreground one: the inner
			// task's updates belong to the outer subagent's thread, like
			// the inner Agent call itself.
			name:  "subagent_nested",
			files: []string{"subagent_nested.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				checkSubagentTasks(t, evs, []string{
					`subagent_task toolu_fake_001_0 aac6ae70041ea1e24 STARTED bg=true desc="Research OAuth" type=general-purpose`,
					`subagent_task toolu_fake_001_0 aac6ae70041ea1e24 RUNNING bg=true desc="Research OAuth" type=general-purpose activity="Inner" last_tool=Agent tokens=20 tools=1 dur=285ms`,
					`[sub toolu_fake_001_0] subagent_task toolu_fake_002_0 a2f8ad9d050a7fd12 STARTED bg=false desc="Inner" type=general-purpose`,
					`[sub toolu_fake_001_0] subagent_task toolu_fake_002_0 a2f8ad9d050a7fd12 COMPLETED bg=false desc="Inner" type=general-purpose summary="The subagent report." tokens=32 tools=0 dur=1744ms`,
					`subagent_task toolu_fake_001_0 aac6ae70041ea1e24 COMPLETED bg=true desc="Research OAuth" type=general-purpose summary="Tool result received: [Subagent hand-back]`,
				})
			},
		},
		{
			name:  "api_error_500",
			files: []string{"api_error_500.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				// The synthetic assistant line repeats the error text: it is not
				// model output, and the ErrorEvent already carries it.
				if got := find(evs, "text"); len(got) != 0 {
					t.Errorf("synthetic API-error message became text: %q", got)
				}
				if got := find(evs, "error "); len(got) != 1 || !strings.HasPrefix(got[0], `error AGENT_ERROR fatal=false "API Error: 500 Internal server error (fake).`) {
					t.Errorf("errors = %q", got)
				}
				if got := find(evs, `status THINKING "model API call failed`); len(got) != 2 {
					t.Errorf("retry statuses = %q, want 2", got)
				}
				if got := find(evs, "turn_complete"); !reflect.DeepEqual(got, []string{"turn_complete api_error"}) {
					t.Errorf("turn complete = %q", got)
				}
			},
		},
		{
			name:  "api_error_429",
			files: []string{"api_error_429.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				want := []string{`error RATE_LIMITED fatal=false "API Error: Request rejected (429) · Rate limited (fake)"`}
				if got := find(evs, "error "); !reflect.DeepEqual(got, want) {
					t.Errorf("errors = %q, want %q", got, want)
				}
				if got := find(evs, "text"); len(got) != 0 {
					t.Errorf("synthetic API-error message became text: %q", got)
				}
			},
		},
		{
			name:  "interrupted_turn",
			files: []string{"interrupted_turn.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				want := []string{`text "w0 "`, `text " w1 "`, `text " w2 "`, "text-complete"}
				if got := find(evs, "text"); !reflect.DeepEqual(got, want) {
					t.Errorf("text = %q, want %q", got, want)
				}
				if got := find(evs, "turn_complete"); !reflect.DeepEqual(got, []string{"turn_complete cancelled"}) {
					t.Errorf("turn complete = %q", got)
				}
			},
		},
		{
			name:  "interrupted_permission",
			files: []string{"interrupted_permission.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				if got := find(evs, "tool_result"); len(got) != 1 || !strings.Contains(got[0], "err=true") {
					t.Errorf("tool result = %q, want one error", got)
				}
				if got := find(evs, "turn_complete"); !reflect.DeepEqual(got, []string{"turn_complete cancelled"}) {
					t.Errorf("turn complete = %q", got)
				}
			},
		},
		{
			name:  "nonstreaming_fallback",
			files: []string{"nonstreaming_fallback.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				want := []string{`text "Answer from the non-streaming fallback." complete`}
				if got := find(evs, "text"); !reflect.DeepEqual(got, want) {
					t.Errorf("text = %q, want %q", got, want)
				}
			},
		},
		{
			name:  "compact_turn",
			files: []string{"compact_turn.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				want := []string{"status THINKING", "status COMPACTING"}
				if got := find(evs, "status"); len(got) < 2 || !reflect.DeepEqual(got[:2], want) {
					t.Errorf("statuses = %q, want %q first", got, want)
				}
			},
		},
		{
			// One UserQuestion per question, all answerable with one
			// UserQuestionResponse to the request id; no PermissionRequest.
			name:  "ask_user_question",
			files: []string{"ask_user_question.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				want := []string{
					`question 6c2ac28e-a438-40df-bb2c-2eb2a80c051a multi=false "Which database should we use?" [Postgres|Postgres|Relational, robust] [SQLite|SQLite|Embedded, simple]`,
					`question 6c2ac28e-a438-40df-bb2c-2eb2a80c051a multi=true "Which features do you want?" [Auth|Auth|Login] [Search|Search|Full text] [Billing|Billing|Payments]`,
					`status WAITING_FOR_USER "AskUserQuestion"`,
				}
				got := append(find(evs, "question"), find(evs, "status WAITING")...)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				if got := find(evs, "permission"); len(got) != 0 {
					t.Errorf("AskUserQuestion gave a PermissionRequest: %q", got)
				}
				// The tool call itself stays visible.
				if got := find(evs, "tool_start toolu_fake_012_0 AskUserQuestion"); len(got) != 1 {
					t.Errorf("tool starts = %q", got)
				}
			},
		},
		{
			name:  "todo_write",
			files: []string{"todo_write.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				want := []string{
					`todos [1 COMPLETED "Write the parser" active="Writing the parser"] [2 IN_PROGRESS "Add tests" active="Adding tests"] [3 PENDING "Update docs" active="Updating docs"]`,
					`todos [1 COMPLETED "Write the parser" active="Writing the parser"] [2 COMPLETED "Add tests" active="Adding tests"] [3 COMPLETED "Update docs" active="Updating docs"]`,
				}
				if got := find(evs, "todos"); !reflect.DeepEqual(got, want) {
					t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			},
		},
		{
			name:  "task_tools",
			files: []string{"task_tools.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				const (
					parser  = `"Write the parser" active="Writing the parser" desc="Parse the NDJSON lines into envelopes"]`
					parser2 = `"Write the NDJSON parser" active="Writing the parser" desc="Parse the NDJSON lines into envelopes"]`
					tests   = ` [2 PENDING "Add tests" active="Adding tests" desc="Golden tests for every line type"]`
				)
				want := []string{
					`todos [1 PENDING ` + parser,
					`todos [1 PENDING ` + parser + tests,
					`todos [1 IN_PROGRESS ` + parser + tests,
					`todos [1 COMPLETED ` + parser2 + tests,
					`todos [1 COMPLETED ` + parser2,
				}
				if got := find(evs, "todos"); !reflect.DeepEqual(got, want) {
					t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			},
		},
		{
			// Launched in plan mode; ExitPlanMode (input {}) is allowed, the
			// mode changes, and the plan comes with the tool's result.
			name:  "plan_mode",
			files: []string{"plan_mode.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				want := []string{
					`plan_mode active=true plan=""`,
					`plan_mode active=false plan="# Plan\n\n1. Add a parser for the NDJSON lines.\n2. Cover it with golden tests.\n"`,
				}
				if got := find(evs, "plan_mode"); !reflect.DeepEqual(got, want) {
					t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				if got := find(evs, "permission 58687947-e460-4f70-aeaa-4e265388058e ExitPlanMode"); len(got) != 1 {
					t.Errorf("ExitPlanMode permission = %q", got)
				}
			},
		},
		{
			name:  "unknown_types",
			files: []string{"unknown_types.jsonl"},
			check: func(t *testing.T, evs []*pb.AgentEvent) {
				if len(evs) != 0 {
					t.Errorf("unknown lines produced events: %q", describeAll(evs))
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps := feed(t, newTranslator(), tt.files...)
			checkInvariants(t, steps)
			tt.check(t, allEvents(steps))
			checkGolden(t, tt.name, render(steps))
		})
	}
}

// checkSubagentTasks checks that evs hold as many SubagentTaskUpdates as
// want, each starting with its entry of want.
func checkSubagentTasks(t *testing.T, evs []*pb.AgentEvent, want []string) {
	t.Helper()
	var got []string
	for _, ev := range evs {
		if ev.GetSubagentTask() != nil {
			got = append(got, describe(ev))
		}
	}
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.HasPrefix(got[i], want[i])
	}
	if !ok {
		t.Errorf("subagent tasks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// translate feeds raw lines to tr and returns the events in compact form.
func translate(t *testing.T, tr *Translator, lines ...string) []string {
	t.Helper()
	return describeAll(translateEvents(t, tr, lines...))
}

// translateEvents feeds raw lines to tr and returns the events.
func translateEvents(t *testing.T, tr *Translator, lines ...string) []*pb.AgentEvent {
	t.Helper()
	var out []*pb.AgentEvent
	for _, l := range lines {
		env, err := claude.DecodeLine([]byte(l))
		if err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		out = append(out, tr.Translate(env)...)
	}
	return out
}

const initLine = `{"type":"system","subtype":"init","cwd":"/home/dev/p","session_id":"s1","tools":["Bash"],"model":"claude-opus-5-5","permissionMode":"default","uuid":"u1"}`

// Result lines from the reference, one per variant the CLI writes.
func TestResultVariants(t *testing.T) {
	tests := []struct {
		name   string
		before []string
		result string
		want   []string
	}{
		{
			name:   "tool turn success",
			result: `{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"Tool result received: done","stop_reason":"end_turn","terminal_reason":"completed","api_error_status":null,"session_id":"7128e74a-404c-4fc6-a021-018680aff120","total_cost_usd":0.0013440000000000001,"permission_denials":[],"duration_ms":87,"duration_api_ms":65,"uuid":"ec75c85d-88cb-4a14-900c-3b96fc66a5b5","result_index":1,"queued_turn_count":0}`,
			want:   []string{"usage in=0 out=0 cache_read=0 cache_write=0 cost=0 model= dur=87ms", "turn_complete end_turn", "status IDLE"},
		},
		{
			name:   "max turns",
			result: `{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":3,"stop_reason":"tool_use","terminal_reason":"max_turns","errors":["Reached maximum number of turns (2)"],"session_id":"76d50de5-c02d-49e2-ad6d-ae5220ae20e3","total_cost_usd":0.0008960000000000001,"permission_denials":[],"duration_ms":163,"duration_api_ms":69,"uuid":"28ebf69a-0610-420d-86d4-c28feadd38b4","result_index":0,"queued_turn_count":0}`,
			want:   []string{`error AGENT_ERROR fatal=false "Reached maximum number of turns (2)"`, "usage in=0 out=0 cache_read=0 cache_write=0 cost=0 model= dur=163ms", "turn_complete max_turns", "status IDLE"},
		},
		{
			name:   "budget",
			result: `{"type":"result","subtype":"error_max_budget_usd","is_error":true,"num_turns":3,"stop_reason":"tool_use","terminal_reason":"budget_exhausted","errors":["Reached maximum budget ($0.001)"],"session_id":"4e3971ac-072b-4078-8709-c4dc44cbda9d","total_cost_usd":0.0013440000000000001,"permission_denials":[],"duration_ms":193,"duration_api_ms":80,"uuid":"491506b2-7055-4cef-9b32-b5b7b53b6d3a","result_index":0,"queued_turn_count":0}`,
			want:   []string{`error AGENT_ERROR fatal=false "Reached maximum budget ($0.001)"`, "usage in=0 out=0 cache_read=0 cache_write=0 cost=0 model= dur=193ms", "turn_complete budget_exhausted", "status IDLE"},
		},
		{
			name:   "unknown session on resume",
			result: `{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":0,"stop_reason":null,"errors":["No conversation found with session ID: 8cfc846f-a124-4e8a-87cb-215889a42a2a"],"session_id":"8cfc846f-a124-4e8a-87cb-215889a42a2a","total_cost_usd":0,"permission_denials":[],"duration_ms":0,"duration_api_ms":0,"uuid":"828d44e7-29a3-4991-83a0-9cc4a938ab1e","result_index":0}`,
			want:   []string{`error AGENT_ERROR fatal=false "No conversation found with session ID: 8cfc846f-a124-4e8a-87cb-215889a42a2a"`, "usage in=0 out=0 cache_read=0 cache_write=0 cost=0 model= dur=0ms", "turn_complete error_during_execution", "status IDLE"},
		},
		{
			name:   "end_session mid-turn",
			result: `{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":2,"stop_reason":null,"terminal_reason":"aborted_streaming","errors":["[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=null"],"session_id":"8ef43b55-799f-401a-999b-4ffdad447990","total_cost_usd":0.000128,"permission_denials":[],"duration_ms":1141,"duration_api_ms":0,"uuid":"fa756397-30ae-487c-a98a-2e2739cee6ba","result_index":0,"queued_turn_count":0}`,
			want:   []string{`error AGENT_ERROR fatal=false "[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=null"`, "usage in=0 out=0 cache_read=0 cache_write=0 cost=0 model= dur=1141ms", "turn_complete cancelled", "status IDLE"},
		},
		{
			name:   "interrupted while a tool runs",
			result: `{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":3,"stop_reason":"tool_use","terminal_reason":"aborted_tools","errors":["[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=tool_use"],"session_id":"5bae4d77-c78b-48c3-82e0-b1920f528942","total_cost_usd":0.00044800000000000005,"permission_denials":[],"duration_ms":2104,"duration_api_ms":56,"uuid":"b3cee5aa-3dee-46cd-a45b-11188df039fd","result_index":0,"queued_turn_count":0}`,
			want:   []string{`error AGENT_ERROR fatal=false "[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=tool_use"`, "usage in=0 out=0 cache_read=0 cache_write=0 cost=0 model= dur=2104ms", "turn_complete cancelled", "status IDLE"},
		},
		{
			// A prompt with priority "now" ends the running turn without
			// is_error; the turn was still cut short.
			name:   "preempted by a priority now prompt",
			result: `{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"w0  w1  w2 ","stop_reason":null,"terminal_reason":"aborted_streaming","api_error_status":null,"session_id":"4a6da298-8d7c-4c93-b1e1-82029b41e981","total_cost_usd":0.000128,"permission_denials":[],"duration_ms":1129,"duration_api_ms":0,"uuid":"e465a7e5-ec3f-4a89-84db-0b0f23d4f323","result_index":0,"queued_turn_count":0}`,
			want:   []string{"usage in=0 out=0 cache_read=0 cache_write=0 cost=0 model= dur=1129ms", "turn_complete cancelled", "status IDLE"},
		},
		{
			name:   "401 api error",
			before: []string{initLine},
			result: `{"type":"result","subtype":"success","is_error":true,"num_turns":1,"result":"Invalid API key · Fix external API key","stop_reason":"stop_sequence","terminal_reason":"api_error","api_error_status":401,"api_error_type":"authentication_error","session_id":"2c788fbd-7312-45bc-9526-eecc215092c3","total_cost_usd":0,"permission_denials":[],"duration_ms":1311,"duration_api_ms":0,"uuid":"0f5e1c52-3a8a-4b8e-9d53-2f6a4b7c1e90","result_index":0,"queued_turn_count":0}`,
			want:   []string{"status THINKING", `error AGENT_ERROR fatal=false "Invalid API key · Fix external API key"`, "usage in=0 out=0 cache_read=0 cache_write=0 cost=0 model=claude-opus-5-5 dur=1311ms", "turn_complete api_error", "status IDLE"},
		},
		{
			name:   "error without errors or result text",
			result: `{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":1,"stop_reason":null,"errors":[],"session_id":"s1","total_cost_usd":0,"duration_ms":5,"uuid":"u2"}`,
			want:   []string{`error AGENT_ERROR fatal=false "turn failed (error_during_execution)"`, "usage in=0 out=0 cache_read=0 cache_write=0 cost=0 model= dur=5ms", "turn_complete error_during_execution", "status IDLE"},
		},
		{
			// Cache reads and writes must not be swapped.
			name:   "cache tokens",
			before: []string{initLine},
			result: `{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"ok","stop_reason":"end_turn","session_id":"s1","total_cost_usd":0.01,"usage":{"input_tokens":5,"cache_creation_input_tokens":300,"cache_read_input_tokens":7000,"output_tokens":40},"duration_ms":900,"uuid":"u3","model_usage_since_last_result":{"claude-opus-5-5":{"inputTokens":5,"outputTokens":40,"cacheReadInputTokens":7000,"cacheCreationInputTokens":300,"costUSD":0.004}}}`,
			want:   []string{"status THINKING", "usage in=5 out=40 cache_read=7000 cache_write=300 cost=0.004 model=claude-opus-5-5 dur=900ms", "turn_complete end_turn", "status IDLE"},
		},
		{
			// Per-turn cost is model_usage_since_last_result summed over
			// models (a subagent may use another one), never the cumulative
			// total_cost_usd or modelUsage; the model is the main thread's.
			name:   "two models in one turn",
			before: []string{initLine},
			result: `{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"ok","stop_reason":"end_turn","session_id":"s1","total_cost_usd":0.5,"usage":{"input_tokens":24,"output_tokens":40},"modelUsage":{"claude-opus-5-5":{"costUSD":0.4},"claude-haiku-5-0":{"costUSD":0.09}},"duration_ms":300,"uuid":"u4","model_usage_since_last_result":{"claude-haiku-5-0":{"costUSD":0.00025},"claude-opus-5-5":{"costUSD":0.000896}}}`,
			want:   []string{"status THINKING", "usage in=24 out=40 cache_read=0 cache_write=0 cost=0.001146 model=claude-opus-5-5 dur=300ms", "turn_complete end_turn", "status IDLE"},
		},
		{
			name:   "model unknown to the translator",
			result: `{"type":"result","subtype":"success","is_error":false,"num_turns":1,"stop_reason":"end_turn","session_id":"s1","duration_ms":3,"uuid":"u5","model_usage_since_last_result":{"claude-sonnet-5-5":{"costUSD":0.002},"claude-haiku-5-0":{"costUSD":0.001}}}`,
			want:   []string{"usage in=0 out=0 cache_read=0 cache_write=0 cost=0.003 model=claude-haiku-5-0 dur=3ms", "turn_complete end_turn", "status IDLE"},
		},
		{
			// A result the translator cannot decode still ends the turn.
			name:   "undecodable result",
			result: `{"type":"result","subtype":"success","is_error":false,"duration_ms":"soon"}`,
			want:   []string{`error AGENT_ERROR fatal=false "undecodable result line: json: cannot unmarshal string into Go struct field Result.duration_ms of type uint32"`, "turn_complete error", "status IDLE"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Map order must not matter: run each case a few times.
			for range 20 {
				got := translate(t, newTranslator(), append(tt.before, tt.result)...)
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
				}
			}
		})
	}
}

// Without the assistant line, the tool's input comes from the streamed
// input_json_delta fragments, at content_block_stop.
func TestToolStartFromStreamAlone(t *testing.T) {
	tr := newTranslator()
	var got []string
	for _, l := range readLines(t, "tool_turn.jsonl")[:10] {
		var probe struct{ Type string }
		_ = json.Unmarshal(l, &probe)
		if probe.Type == "assistant" {
			continue
		}
		got = append(got, translate(t, tr, string(l))...)
	}
	want := []string{
		"status THINKING",
		`tool_start toolu_fake_002_0 Bash desc="Create a file" input={"command":"touch created-by-tool.txt && echo done","description":"Create a file"}`,
		`status EXECUTING_TOOL "Bash"`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A tool id is announced once however many lines carry it, also across
// turns; an input the stream cut short still gives a start, without input.
func TestToolStartOnce(t *testing.T) {
	tr := newTranslator()
	assistant := string(readLines(t, "tool_turn.jsonl")[6])
	got := translate(t, tr, assistant, assistant, initLine, assistant)
	if n := len(withPrefix(got, "tool_start")); n != 1 {
		t.Errorf("%d ToolCallStart for one tool id: %q", n, got)
	}

	tr = newTranslator()
	got = translate(t, tr,
		`{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1","model":"claude-opus-5-5"}},"parent_tool_use_id":null}`,
		`{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_x","name":"Read","input":{}}},"parent_tool_use_id":null}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"file_path\": \"/tm"}},"parent_tool_use_id":null}`,
		`{"type":"stream_event","event":{"type":"content_block_stop","index":0},"parent_tool_use_id":null}`,
	)
	want := []string{"status THINKING", `tool_start toolu_x Read desc="" input=<nil>`, `status EXECUTING_TOOL "Read"`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func withPrefix(descs []string, prefix string) []string {
	var out []string
	for _, d := range descs {
		if strings.HasPrefix(d, prefix) {
			out = append(out, d)
		}
	}
	return out
}

// ToolCallResult.duration_ms is the injected clock's time between the
// tool's start and its result.
func TestToolDurationUsesInjectedClock(t *testing.T) {
	now := time.Date(2026, 11, 21, 19, 3, 7, 0, time.UTC)
	tr := New(func() time.Time { return now })
	lines := readLines(t, "tool_turn.jsonl")
	translate(t, tr, string(lines[6])) // assistant tool_use: start
	now = now.Add(1500 * time.Millisecond)
	got := translate(t, tr, string(lines[11])) // user tool_result
	if len(got) == 0 || got[0] != `tool_result toolu_fake_002_0 err=false dur=1500ms output="done"` {
		t.Errorf("events = %q", got)
	}
	// A result for a tool never announced has no duration rather than a wrong one.
	got = translate(t, New(func() time.Time { return now }), string(lines[11]))
	if len(got) == 0 || !strings.Contains(got[0], "dur=0ms") {
		t.Errorf("events = %q", got)
	}
}

// A subagent's permission request is attributed to its Agent call only
// when task_started told which call that is; otherwise it stays unattributed.
func TestSubagentPermissionWithoutTaskStarted(t *testing.T) {
	lines := readLines(t, "subagent_turn.jsonl")
	got := translate(t, newTranslator(), string(lines[13]))
	want := []string{
		`permission 91b096e8-c138-41f5-a715-e7136191be6e Bash desc="Create a file" input={"command":"touch created-by-tool.txt && echo done","description":"Create a file"} tool_use=toolu_fake_020_0` +
			` suggest={"behavior":"allow","destination":"localSettings","rules":[{"ruleContent":"touch created-by-tool.txt && echo done","toolName":"Bash"}],"type":"addRules"}` +
			` suggest={"destination":"session","directories":["/home/dev/proj-ey07ok60"],"type":"addDirectories"}` +
			` suggest={"destination":"session","mode":"acceptEdits","type":"setMode"}`,
		`status WAITING_FOR_USER "Bash"`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The description falls back to decision_reason (Write outside the
// working directories has no description of its own).
func TestPermissionDescriptionFallback(t *testing.T) {
	got := translate(t, newTranslator(), `{"type":"control_request","request_id":"1d142e9b-e7e6-43e6-ba9a-4a6ee64d5c66","request":{"subtype":"can_use_tool","tool_name":"Write","display_name":"Write","input":{"file_path":"/home/dev/outside/x.txt","content":"hello\n"},"permission_suggestions":[{"type":"addDirectories","directories":["/home/dev/outside"],"destination":"session"}],"decision_reason":"Path is outside allowed working directories","decision_reason_type":"workingDir","server_policy_ask_only":true,"tool_use_id":"toolu_fake_078_0"}}`)
	want := []string{
		`permission 1d142e9b-e7e6-43e6-ba9a-4a6ee64d5c66 Write desc="Path is outside allowed working directories" input={"content":"hello\n","file_path":"/home/dev/outside/x.txt"} tool_use=toolu_fake_078_0` +
			` suggest={"destination":"session","directories":["/home/dev/outside"],"type":"addDirectories"}`,
		`status WAITING_FOR_USER "Write"`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The status a caller set itself is not announced again.
func TestSetStatusSuppressesRepeat(t *testing.T) {
	tr := newTranslator()
	tr.SetStatus(pb.AgentStatus_THINKING)
	if got := translate(t, tr, initLine); len(got) != 0 {
		t.Errorf("init after SetStatus(THINKING) gave %q", got)
	}
	if tr.Model() != "claude-opus-5-5" || tr.Status() != pb.AgentStatus_THINKING {
		t.Errorf("model %q status %s", tr.Model(), tr.Status())
	}
}
