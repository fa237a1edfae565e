package bridge

import (
	"encoding/json"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// ToolExitPlanMode is the tool by which the model asks to leave plan mode.
const ToolExitPlanMode = "ExitPlanMode"

// PlanMode reports whether the CLI last said it is in plan mode.
func (t *Translator) PlanMode() bool { return t.plan }

func planEvent(active bool, plan string) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_PlanMode{PlanMode: &pb.PlanModeChange{Active: active, Plan: plan}}}
}

// setMode records a permissionMode from an init or status line and
// announces entering or leaving plan mode.
func (t *Translator) setMode(out []*pb.AgentEvent, mode string) []*pb.AgentEvent {
	if mode == "" {
		return out
	}
	switch plan := mode == "plan"; {
	case plan && !t.plan:
		out = t.flushPlanExit(out)
		t.plan, t.planText = true, ""
		out = append(out, planEvent(true, ""))
	case !plan && t.plan:
		t.plan, t.planExit = false, true
		// Allowing ExitPlanMode switches the mode while the tool runs; the
		// plan may only be known from its result, so wait for that.
		if t.planText == "" && t.exitPlanPending() {
			return out
		}
		out = t.flushPlanExit(out)
	}
	return out
}

// flushPlanExit emits the PlanModeChange for a plan mode already left.
func (t *Translator) flushPlanExit(out []*pb.AgentEvent) []*pb.AgentEvent {
	if !t.planExit {
		return out
	}
	out = append(out, planEvent(false, t.planText))
	t.planExit, t.planText = false, ""
	return out
}

func (t *Translator) exitPlanPending() bool {
	for _, c := range t.calls {
		if c.name == ToolExitPlanMode {
			return true
		}
	}
	return false
}

// notePlan keeps the plan an ExitPlanMode input carries (the older input
// schema had one; the current one keeps the plan in a file).
func (t *Translator) notePlan(input json.RawMessage) {
	var in struct {
		Plan string `json:"plan"`
	}
	if json.Unmarshal(input, &in) == nil && in.Plan != "" {
		t.planText = in.Plan
	}
}

// exitPlanResult takes the plan from ExitPlanMode's tool_use_result
// (ExitPlanModeOutput.plan) when no input carried one, and emits a plan
// exit that was waiting for it.
func (t *Translator) exitPlanResult(out []*pb.AgentEvent, isError bool, result json.RawMessage) []*pb.AgentEvent {
	if t.planText == "" && !isError {
		var r struct {
			Plan *string `json:"plan"`
		}
		if json.Unmarshal(result, &r) == nil && r.Plan != nil {
			t.planText = *r.Plan
		}
	}
	return t.flushPlanExit(out)
}
