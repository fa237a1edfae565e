package bridge

import (
	"slices"
	"strings"
	"testing"
)

// Lines of the reference's foreground subagent (§8.3), and variants of them.
const (
	refTaskStarted  = `{"type":"system","subtype":"task_started","task_id":"ae7257b499f711def","run_id":"0mwqs0z02-53ea1ebb","tool_use_id":"toolu_fake_019_0","description":"Run a command","subagent_type":"general-purpose","is_backgrounded":false,"spawn_depth":1,"task_type":"local_agent","prompt":"Please RUNTOOL in the subagent","uuid":"9cd1d389-4cdb-4721-9d40-527768aec3b3","session_id":"aa417a29-d27d-4d1a-836d-4d7bca8c017a"}`
	refTaskProgress = `{"type":"system","subtype":"task_progress","task_id":"ae7257b499f711def","run_id":"0mwqs0z02-53ea1ebb","tool_use_id":"toolu_fake_019_0","description":"Running Create a file","subagent_type":"general-purpose","usage":{"total_tokens":22,"tool_uses":1,"duration_ms":34},"last_tool_name":"Bash","uuid":"2fc73b0f-d74e-4a5b-b409-2e08c0eecc7b","session_id":"aa417a29-d27d-4d1a-836d-4d7bca8c017a"}`
	refTaskUpdated  = `{"type":"system","subtype":"task_updated","task_id":"ae7257b499f711def","run_id":"0mwqs0z02-53ea1ebb","patch":{"status":"completed","end_time":1795287840212},"uuid":"100b4f69-6b5e-4dc8-9df4-3ec96c2b7620","session_id":"aa417a29-d27d-4d1a-836d-4d7bca8c017a"}`
	refTaskNotified = `{"type":"system","subtype":"task_notification","task_id":"ae7257b499f711def","run_id":"0mwqs0z02-53ea1ebb","tool_use_id":"toolu_fake_019_0","status":"completed","output_file":"$TMPDIR/claude-<uid>/-home-dev-proj-ey07ok60/aa417a29-d27d-4d1a-836d-4d7bca8c017a/tasks/ae7257b499f711def.output","summary":"Tool result received: done","usage":{"total_tokens":32,"tool_uses":2,"duration_ms":168},"uuid":"9a9dc2ef-1aaf-4ad0-80f2-2a548a67694f","session_id":"aa417a29-d27d-4d1a-836d-4d7bca8c017a"}`
	// A background shell command is a task too (task_type local_bash).
	bashTaskStarted = `{"type":"system","subtype":"task_started","task_id":"b1","tool_use_id":"toolu_bash","description":"sleep 60","is_backgrounded":true,"task_type":"local_bash","uuid":"u1","session_id":"s1"}`
	bashTaskEnded   = `{"type":"system","subtype":"task_notification","task_id":"b1","tool_use_id":"toolu_bash","status":"completed","output_file":"","summary":"sleep 60","uuid":"u2","session_id":"s1"}`
)

// sub replaces old by new in a reference line (once, or fails the test).
func sub(t *testing.T, line, old, new string) string {
	t.Helper()
	if strings.Count(line, old) != 1 {
		t.Fatalf("%q not once in %s", old, line)
	}
	return strings.Replace(line, old, new, 1)
}

func TestSubagentTaskLines(t *testing.T) {
	const (
		started  = `subagent_task toolu_fake_019_0 ae7257b499f711def STARTED bg=false desc="Run a command" type=general-purpose`
		running  = `subagent_task toolu_fake_019_0 ae7257b499f711def RUNNING bg=false desc="Run a command" type=general-purpose`
		progress = running + ` activity="Running Create a file" last_tool=Bash tokens=22 tools=1 dur=34ms`
		done     = `subagent_task toolu_fake_019_0 ae7257b499f711def COMPLETED bg=false desc="Run a command" type=general-purpose summary="Tool result received: done" tokens=32 tools=2 dur=168ms`
	)
	progressRead := sub(t, sub(t, refTaskProgress, `"last_tool_name":"Bash"`, `"last_tool_name":"Read"`), `"tool_uses":1`, `"tool_uses":3`)
	tests := []struct {
		name  string
		lines func(t *testing.T) []string
		want  []string
	}{
		{
			name: "reference foreground subagent",
			lines: func(*testing.T) []string {
				return []string{refTaskStarted, refTaskProgress, refTaskUpdated, refTaskNotified}
			},
			want: []string{started, progress, done},
		},
		{
			name: "progress only when the tool changes",
			lines: func(t *testing.T) []string {
				return []string{refTaskStarted, refTaskProgress, sub(t, refTaskProgress, `"tool_uses":1`, `"tool_uses":2`), progressRead, progressRead, refTaskProgress}
			},
			want: []string{started, progress, running + ` activity="Running Create a file" last_tool=Read tokens=22 tools=3 dur=34ms`, progress},
		},
		{
			name: "progress with a summary line",
			lines: func(t *testing.T) []string {
				withSummary := sub(t, refTaskProgress, `"last_tool_name":"Bash"`, `"last_tool_name":"Bash","summary":"Creating the file"`)
				return []string{refTaskStarted, refTaskProgress, withSummary, withSummary}
			},
			want: []string{started, progress, running + ` activity="Creating the file" last_tool=Bash tokens=22 tools=1 dur=34ms`},
		},
		{
			name: "moved to the background, paused and resumed",
			lines: func(t *testing.T) []string {
				return []string{
					refTaskStarted,
					sub(t, refTaskUpdated, `"patch":{"status":"completed","end_time":1795287840212}`, `"patch":{"is_backgrounded":true}`),
					sub(t, refTaskUpdated, `"status":"completed"`, `"status":"paused"`),
					sub(t, refTaskUpdated, `"status":"completed"`, `"status":"paused"`),
					sub(t, refTaskUpdated, `"status":"completed"`, `"status":"running"`),
					sub(t, refTaskUpdated, `"patch":{"status":"completed","end_time":1795287840212}`, `"patch":{"description":"renamed"}`),
				}
			},
			want: []string{
				started,
				`subagent_task toolu_fake_019_0 ae7257b499f711def STARTED bg=true desc="Run a command" type=general-purpose`,
				`subagent_task toolu_fake_019_0 ae7257b499f711def PAUSED bg=true desc="Run a command" type=general-purpose`,
				`subagent_task toolu_fake_019_0 ae7257b499f711def RUNNING bg=true desc="Run a command" type=general-purpose`,
			},
		},
		{
			name: "failed, with the patch's error",
			lines: func(t *testing.T) []string {
				return []string{
					refTaskStarted,
					sub(t, refTaskUpdated, `"status":"completed"`, `"status":"failed","error":"API Error: 500"`),
					sub(t, sub(t, refTaskNotified, `"status":"completed"`, `"status":"failed"`), `"summary":"Tool result received: done"`, `"summary":"error"`),
				}
			},
			want: []string{started, `subagent_task toolu_fake_019_0 ae7257b499f711def FAILED bg=false desc="Run a command" type=general-purpose summary="error" error="API Error: 500" tokens=32 tools=2 dur=168ms`},
		},
		{
			name: "a status Claude Code does not list ends it as stopped",
			lines: func(t *testing.T) []string {
				return []string{refTaskStarted, sub(t, refTaskNotified, `"status":"completed"`, `"status":"timed_out"`)}
			},
			want: []string{started, `subagent_task toolu_fake_019_0 ae7257b499f711def STOPPED bg=false desc="Run a command" type=general-purpose summary="Tool result received: done" tokens=32 tools=2 dur=168ms`},
		},
		{
			name: "nothing after the end, until it starts again",
			lines: func(t *testing.T) []string {
				return []string{refTaskStarted, refTaskNotified, refTaskProgress, refTaskNotified, sub(t, refTaskUpdated, `"status":"completed"`, `"status":"running"`), refTaskStarted, refTaskNotified}
			},
			want: []string{started, done, started, done},
		},
		{
			name:  "lines of a task never started are dropped",
			lines: func(*testing.T) []string { return []string{refTaskProgress, refTaskUpdated, refTaskNotified} },
		},
		{
			name:  "tasks that are not subagents are dropped",
			lines: func(*testing.T) []string { return []string{bashTaskStarted, bashTaskEnded} },
		},
		{
			name: "started without a tool call or a task id",
			lines: func(t *testing.T) []string {
				return []string{sub(t, refTaskStarted, `"tool_use_id":"toolu_fake_019_0",`, ""), sub(t, refTaskStarted, `"task_id":"ae7257b499f711def"`, `"task_id":""`), refTaskNotified}
			},
		},
		{
			name: "undecodable lines are dropped",
			lines: func(t *testing.T) []string {
				return []string{
					sub(t, refTaskStarted, `"task_id":"ae7257b499f711def"`, `"task_id":7`),
					refTaskStarted,
					sub(t, refTaskProgress, `"total_tokens":22`, `"total_tokens":-1`),
					sub(t, refTaskNotified, `"usage":{`, `"usage":[],"x":{`),
				}
			},
			want: []string{started},
		},
		{
			name: "other task subtypes are dropped",
			lines: func(t *testing.T) []string {
				return []string{refTaskStarted, sub(t, refTaskProgress, `"subtype":"task_progress"`, `"subtype":"task_reviewed"`)}
			},
			want: []string{started},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := translate(t, newTranslator(), tt.lines(t)...)
			if !slices.Equal(got, tt.want) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
