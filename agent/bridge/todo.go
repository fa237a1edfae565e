package bridge

import (
	"encoding/json"
	"slices"
	"strconv"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Checklist tools: TodoWrite sends the whole list each call; the Task*
// tools edit a list one item at a time.
const (
	ToolTodoWrite  = "TodoWrite"
	ToolTaskCreate = "TaskCreate"
	ToolTaskUpdate = "TaskUpdate"
)

// todoStatus maps a checklist status; anything else is unspecified.
func todoStatus(s string) pb.TodoStatus {
	switch s {
	case "pending":
		return pb.TodoStatus_PENDING
	case "in_progress":
		return pb.TodoStatus_IN_PROGRESS
	case "completed":
		return pb.TodoStatus_COMPLETED
	}
	return pb.TodoStatus_TODO_STATUS_UNSPECIFIED
}

// todoEvent builds a TodoUpdate from items the event then owns.
func todoEvent(items []*pb.TodoItem) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_TodoUpdate{TodoUpdate: &pb.TodoUpdate{Items: items}}}
}

// todoWrite maps a TodoWrite input (input.todos, the whole list) to a
// TodoUpdate whose ids are the 1-based positions. ok is false when the
// input has no todos array.
func todoWrite(input json.RawMessage) (ev *pb.AgentEvent, ok bool) {
	var in struct {
		Todos *[]struct {
			Content    string `json:"content"`
			Status     string `json:"status"`
			ActiveForm string `json:"activeForm"`
		} `json:"todos"`
	}
	if json.Unmarshal(input, &in) != nil || in.Todos == nil {
		return nil, false
	}
	items := make([]*pb.TodoItem, 0, len(*in.Todos))
	for i, td := range *in.Todos {
		items = append(items, &pb.TodoItem{
			Id: strconv.Itoa(i + 1), Subject: td.Content, ActiveForm: td.ActiveForm, Status: todoStatus(td.Status),
		})
	}
	return todoEvent(items), true
}

// task is one item of the Task* checklist.
type task struct {
	id, subject, description, activeForm string
	status                               pb.TodoStatus
}

// checklist is the Task* list as the translator last saw it confirmed.
type checklist struct {
	tasks []task
	last  int // highest numeric task id seen: Claude Code numbers tasks 1, 2, … and never reuses one
}

// event snapshots the list: emitted events must not share state the
// translator goes on changing.
func (c *checklist) event() *pb.AgentEvent {
	items := make([]*pb.TodoItem, 0, len(c.tasks))
	for _, t := range c.tasks {
		items = append(items, &pb.TodoItem{Id: t.id, Subject: t.subject, Description: t.description, ActiveForm: t.activeForm, Status: t.status})
	}
	return todoEvent(items)
}

func (c *checklist) find(id string) int {
	return slices.IndexFunc(c.tasks, func(t task) bool { return t.id == id })
}

// create applies a successful TaskCreate. The id comes from the result's
// tool_use_result.task.id (TaskCreateOutput); without one it is the next
// number, which is what Claude Code assigns.
func (c *checklist) create(input, result json.RawMessage) bool {
	var in struct {
		Subject     string `json:"subject"`
		Description string `json:"description"`
		ActiveForm  string `json:"activeForm"`
	}
	if json.Unmarshal(input, &in) != nil {
		return false
	}
	var out struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	_ = json.Unmarshal(result, &out)
	id := out.Task.ID
	if id == "" {
		id = strconv.Itoa(c.last + 1)
	}
	if n, err := strconv.Atoi(id); err == nil && n > c.last {
		c.last = n
	}
	t := task{id: id, subject: in.Subject, description: in.Description, activeForm: in.ActiveForm, status: pb.TodoStatus_PENDING}
	if i := c.find(id); i >= 0 {
		c.tasks[i] = t
	} else {
		c.tasks = append(c.tasks, t)
	}
	return true
}

// update applies a successful TaskUpdate and reports whether the list
// changed. Updates to tasks the translator never saw created (a resumed
// session, a daemon restart) are ignored: there is nothing to show them in.
func (c *checklist) update(input, result json.RawMessage) bool {
	var in struct {
		TaskID      string  `json:"taskId"`
		Subject     *string `json:"subject"`
		Description *string `json:"description"`
		ActiveForm  *string `json:"activeForm"`
		Status      *string `json:"status"`
	}
	if json.Unmarshal(input, &in) != nil {
		return false
	}
	var out struct {
		Success *bool `json:"success"`
	}
	if json.Unmarshal(result, &out) == nil && out.Success != nil && !*out.Success {
		return false
	}
	i := c.find(in.TaskID)
	if i < 0 {
		return false
	}
	if in.Status != nil && *in.Status == "deleted" {
		c.tasks = slices.Delete(c.tasks, i, i+1)
		return true
	}
	t := c.tasks[i]
	if in.Subject != nil {
		t.subject = *in.Subject
	}
	if in.Description != nil {
		t.description = *in.Description
	}
	if in.ActiveForm != nil {
		t.activeForm = *in.ActiveForm
	}
	if in.Status != nil {
		if s := todoStatus(*in.Status); s != pb.TodoStatus_TODO_STATUS_UNSPECIFIED {
			t.status = s
		}
	}
	if t == c.tasks[i] {
		return false
	}
	c.tasks[i] = t
	return true
}
