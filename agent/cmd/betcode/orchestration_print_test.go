package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

const (
	stPending   = pb.SubagentStatus_SUBAGENT_STATUS_PENDING
	stRunning   = pb.SubagentStatus_SUBAGENT_STATUS_RUNNING
	stCompleted = pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED
	stFailed    = pb.SubagentStatus_SUBAGENT_STATUS_FAILED
	stSkipped   = pb.SubagentStatus_SUBAGENT_STATUS_SKIPPED
)

func orchSnapshot(st pb.OrchestrationStatus, steps ...*pb.OrchestrationStepState) *pb.WatchOrchestrationResponse {
	return &pb.WatchOrchestrationResponse{OrchestrationId: "o-1", Timestamp: ts("2030-01-02T03:04:05Z"),
		Event: &pb.WatchOrchestrationResponse_Snapshot{Snapshot: &pb.Orchestration{Id: "o-1", Name: "fan-in", Status: st, Steps: steps}}}
}

func stepUpdate(s *pb.OrchestrationStepState) *pb.WatchOrchestrationResponse {
	return &pb.WatchOrchestrationResponse{OrchestrationId: "o-1", Timestamp: ts("2030-01-02T03:04:05Z"),
		Event: &pb.WatchOrchestrationResponse_StepUpdate{StepUpdate: s}}
}

func stepState(id string, st pb.SubagentStatus, attempt uint32, sa, errText string, deps ...string) *pb.OrchestrationStepState {
	return &pb.OrchestrationStepState{StepId: id, Status: st, Attempt: attempt, SubagentId: sa, Error: errText, DependsOn: deps}
}

// fanIn is a watch of a, b (retried once) and c after both.
func fanIn(final pb.OrchestrationStatus, last *pb.OrchestrationStepState) []*pb.WatchOrchestrationResponse {
	run := pb.OrchestrationStatus_ORCHESTRATION_STATUS_RUNNING
	return []*pb.WatchOrchestrationResponse{
		orchSnapshot(run, stepState("a", stPending, 0, "", ""), stepState("b", stPending, 0, "", ""), stepState("c", stPending, 0, "", "", "a", "b")),
		stepUpdate(stepState("a", stRunning, 1, "sa-a", "")),
		stepUpdate(stepState("b", stRunning, 1, "sa-b1", "")),
		stepUpdate(stepState("a", stCompleted, 1, "sa-a", "")),
		stepUpdate(stepState("b", stRunning, 2, "sa-b2", "API error 500")),
		stepUpdate(stepState("b", stCompleted, 2, "sa-b2", "")),
		stepUpdate(last),
		orchSnapshot(final, stepState("a", stCompleted, 1, "sa-a", ""), stepState("b", stCompleted, 2, "sa-b2", ""), last),
	}
}

func TestOrchestrationViewLines(t *testing.T) {
	clock := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).Local().Format(time.TimeOnly)
	tests := []struct {
		name     string
		stream   []*pb.WatchOrchestrationResponse
		want     string
		wantExit int
		wantErr  string
	}{
		{
			name:   "completed",
			stream: fanIn(pb.OrchestrationStatus_ORCHESTRATION_STATUS_COMPLETED, stepState("c", stCompleted, 1, "sa-c", "", "a", "b")),
			want: `orchestration o-1 "fan-in": RUNNING, 0/3 steps completed
STEP  STATUS   ATTEMPT  SUBAGENT  DEPENDS ON  ERROR
a     PENDING  -        -         -           -
b     PENDING  -        -         -           -
c     PENDING  -        -         a, b        -
T  a  PENDING -> RUNNING  attempt 1  subagent sa-a
T  b  PENDING -> RUNNING  attempt 1  subagent sa-b1
T  a  RUNNING -> COMPLETED  attempt 1  subagent sa-a
T  b  RUNNING  attempt 2  subagent sa-b2  error: API error 500
T  b  RUNNING -> COMPLETED  attempt 2  subagent sa-b2
T  c  PENDING -> COMPLETED  attempt 1  subagent sa-c
orchestration o-1 "fan-in": COMPLETED, 3/3 steps completed
STEP  STATUS     ATTEMPT  SUBAGENT  DEPENDS ON  ERROR
a     COMPLETED  1        sa-a      -           -
b     COMPLETED  2        sa-b2     -           -
c     COMPLETED  1        sa-c      a, b        -
`,
		},
		{
			name:     "failed",
			stream:   fanIn(pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED, stepState("c", stFailed, 1, "sa-c", "CLI crashed", "a", "b")),
			wantExit: client.ExitAgentError, wantErr: "orchestration o-1 ended FAILED: c FAILED (CLI crashed)",
		},
		{
			name:     "ended while running",
			stream:   fanIn(pb.OrchestrationStatus_ORCHESTRATION_STATUS_RUNNING, stepState("c", stRunning, 1, "sa-c", "", "a", "b")),
			wantExit: client.ExitConnection, wantErr: "the stream ended while it was RUNNING",
		},
		{name: "nothing", wantExit: client.ExitConnection, wantErr: "the stream ended before its first snapshot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			v := &orchestrationView{out: &b}
			for _, m := range tt.stream {
				if err := v.print(m); err != nil {
					t.Fatal(err)
				}
			}
			if got := strings.ReplaceAll(b.String(), clock, "T"); tt.want != "" && got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			err := v.result("o-1")
			if client.ExitCode(err) != tt.wantExit || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("result %v (exit %d), want exit %d with %q", err, client.ExitCode(err), tt.wantExit, tt.wantErr)
			}
		})
	}
}

// TestOrchestrationViewLive: on a terminal each event redraws the table in
// place: the cursor goes up the table's lines and clears below.
func TestOrchestrationViewLive(t *testing.T) {
	var b bytes.Buffer
	v := &orchestrationView{out: &b, live: true}
	stream := fanIn(pb.OrchestrationStatus_ORCHESTRATION_STATUS_COMPLETED, stepState("c", stCompleted, 1, "sa-c", "", "a", "b"))
	for _, m := range stream {
		if err := v.print(m); err != nil {
			t.Fatal(err)
		}
	}
	frames := strings.Split(b.String(), "\x1b[5A\x1b[J") // headline, header, 3 steps
	if len(frames) != len(stream) {
		t.Fatalf("%d frames for %d events:\n%q", len(frames), len(stream), b.String())
	}
	if !strings.Contains(frames[2], "b     RUNNING  1        sa-b1") || !strings.HasPrefix(frames[len(frames)-1], `orchestration o-1 "fan-in": COMPLETED, 3/3`) {
		t.Fatalf("frames:\n%s", strings.Join(frames, "\n---\n"))
	}
	if err := v.result("o-1"); err != nil {
		t.Fatal(err)
	}
}

func TestOrchestrationViewJSON(t *testing.T) {
	var b bytes.Buffer
	v := &orchestrationView{out: &b, json: true}
	stream := fanIn(pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED, stepState("c", stSkipped, 0, "", "", "a", "b"))
	for _, m := range stream {
		if err := v.print(m); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(b.String(), "\n"); n != len(stream) {
		t.Fatalf("%d lines for %d events", n, len(stream))
	}
	if err := v.result("o-1"); client.ExitCode(err) != client.ExitAgentError || !strings.Contains(err.Error(), "c SKIPPED") {
		t.Fatalf("result %v", err)
	}
}

func TestPrintOrchestrationList(t *testing.T) {
	list := []*pb.Orchestration{
		{Id: "o-1", Name: "fan-in", Status: pb.OrchestrationStatus_ORCHESTRATION_STATUS_RUNNING, ParentSessionId: "p-1",
			Steps: []*pb.OrchestrationStepState{stepState("a", stCompleted, 1, "", ""), stepState("b", stRunning, 1, "", "")}},
		{Id: "o-2", Status: pb.OrchestrationStatus_ORCHESTRATION_STATUS_CANCELLED, ParentSessionId: "p-1"},
	}
	want := `ID   NAME    STATUS     STEPS DONE  PARENT  CREATED  FINISHED
o-1  fan-in  RUNNING    1/2         p-1     -        -
o-2  -       CANCELLED  0/0         p-1     -        -
`
	var b bytes.Buffer
	if err := printOrchestrationList(&b, list); err != nil {
		t.Fatal(err)
	}
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
