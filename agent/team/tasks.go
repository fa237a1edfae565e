package team

import (
	"context"
	"errors"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// stepTaskStatus maps a step's status to ccgrid's three: a failed step is
// done ("completed"), a skipped or cancelled one never ran ("pending");
// TeamTask.step_status keeps the detail.
func stepTaskStatus(s pb.SubagentStatus) pb.TeamTaskStatus {
	switch s {
	case pb.SubagentStatus_SUBAGENT_STATUS_RUNNING, pb.SubagentStatus_SUBAGENT_STATUS_WAITING_FOR_USER:
		return pb.TeamTaskStatus_TEAM_TASK_STATUS_IN_PROGRESS
	case pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED, pb.SubagentStatus_SUBAGENT_STATUS_FAILED:
		return pb.TeamTaskStatus_TEAM_TASK_STATUS_COMPLETED
	}
	return pb.TeamTaskStatus_TEAM_TASK_STATUS_PENDING
}

// todoTaskStatus maps a todo item's status; an unknown one is pending.
func todoTaskStatus(s pb.TodoStatus) pb.TeamTaskStatus {
	switch s {
	case pb.TodoStatus_IN_PROGRESS:
		return pb.TeamTaskStatus_TEAM_TASK_STATUS_IN_PROGRESS
	case pb.TodoStatus_COMPLETED:
		return pb.TeamTaskStatus_TEAM_TASK_STATUS_COMPLETED
	}
	return pb.TeamTaskStatus_TEAM_TASK_STATUS_PENDING
}

// StepTaskID is the task id of an orchestration's step.
func StepTaskID(orchestrationID, stepID string) string { return orchestrationID + "/" + stepID }

// stepTasks are an orchestration's steps as tasks, in step order: owned by
// the step's (latest) subagent, blocked by its dependencies and blocking
// its dependents. prompts maps a subagent id to the prompt it was given,
// when known.
func stepTasks(o *pb.Orchestration, prompts map[string]string) []*pb.TeamTask {
	blocks := map[string][]string{}
	for _, st := range o.GetSteps() {
		for _, dep := range st.GetDependsOn() {
			blocks[dep] = append(blocks[dep], StepTaskID(o.GetId(), st.GetStepId()))
		}
	}
	out := make([]*pb.TeamTask, 0, len(o.GetSteps()))
	for _, st := range o.GetSteps() {
		t := &pb.TeamTask{
			Id: StepTaskID(o.GetId(), st.GetStepId()), Subject: st.GetStepId(),
			Description: head(prompts[st.GetSubagentId()], MaxText), Status: stepTaskStatus(st.GetStatus()),
			AssignedAgentId: st.GetSubagentId(), Blocks: blocks[st.GetStepId()], StepStatus: st.GetStatus(),
			OrchestrationId: o.GetId(),
		}
		for _, dep := range st.GetDependsOn() {
			t.BlockedBy = append(t.BlockedBy, StepTaskID(o.GetId(), dep))
		}
		out = append(out, t)
	}
	return out
}

// todoTasks are a TodoUpdate's items as tasks, owned by the session itself.
func todoTasks(u *pb.TodoUpdate) []*pb.TeamTask {
	out := make([]*pb.TeamTask, 0, len(u.GetItems()))
	for _, it := range u.GetItems() {
		out = append(out, &pb.TeamTask{
			Id: it.GetId(), Subject: it.GetSubject(), Description: head(it.GetDescription(), MaxText),
			Status: todoTaskStatus(it.GetStatus()),
		})
	}
	return out
}

// ListTasks lists a session's orchestration steps, then its own task list
// (its latest TodoUpdate; a subagent's TodoUpdates, which carry
// parent_tool_use_id, are the subagent's own list).
func (s *Service) ListTasks(ctx context.Context, req *pb.ListTasksRequest) (*pb.ListTasksResponse, error) {
	id := req.GetSessionId()
	if _, err := s.opt.Sessions.Pending(ctx, id); err != nil {
		return nil, sessionStatus(err, "list tasks")
	}
	orchs, err := s.orchestrations(ctx, id)
	if err != nil {
		return nil, commonStatus(err, "list orchestrations")
	}
	out := &pb.ListTasksResponse{}
	if len(orchs) > 0 {
		subs, err := s.subagents(ctx, id)
		if err != nil {
			return nil, commonStatus(err, "list subagents")
		}
		prompts := map[string]string{}
		for _, sa := range subs {
			if sa.GetOrchestrationId() == "" {
				continue
			}
			p, _, err := s.sessionText(ctx, sa.GetSessionId(), true)
			if err != nil {
				return nil, commonStatus(err, "read subagent "+sa.GetId())
			}
			prompts[sa.GetId()] = p
		}
		for _, o := range orchs {
			out.Tasks = append(out.Tasks, stepTasks(o, prompts)...)
		}
	}
	var todo *pb.TodoUpdate // the session's own latest list (not a subagent's)
	err = s.opt.Sessions.Latest(ctx, id, []string{kindTodo}, func(ev *pb.AgentEvent) error {
		if u := ev.GetTodoUpdate(); u != nil && ev.GetParentToolUseId() == "" {
			todo = u
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	if err != nil {
		return nil, sessionStatus(err, "read session events")
	}
	out.Tasks = append(out.Tasks, todoTasks(todo)...)
	return out, nil
}
