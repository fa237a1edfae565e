package subagent

import (
	"fmt"
	"slices"
	"strings"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// node is one step of a plan as the scheduler sees it.
type node struct {
	ID        string
	DependsOn []string
}

// PlanError is a plan that cannot run: a missing or repeated step id, a
// dependency on an unknown step, or a cycle.
type PlanError struct{ Msg string }

func (e *PlanError) Error() string { return e.Msg }

// dag is the run state of an orchestration's steps. It is not safe for
// concurrent use; the orchestration's lock guards it.
type dag struct {
	order      []string // request order
	deps       map[string][]string
	dependents map[string][]string
	status     map[string]pb.SubagentStatus
}

// newDAG validates a plan and returns it with every step PENDING.
func newDAG(nodes []node) (*dag, error) {
	if len(nodes) == 0 {
		return nil, &PlanError{Msg: "the orchestration has no steps"}
	}
	d := &dag{deps: map[string][]string{}, dependents: map[string][]string{}, status: map[string]pb.SubagentStatus{}}
	for i, n := range nodes {
		if n.ID == "" {
			return nil, &PlanError{Msg: fmt.Sprintf("step %d has no id", i+1)}
		}
		if _, dup := d.deps[n.ID]; dup {
			return nil, &PlanError{Msg: fmt.Sprintf("step id %q is used twice", n.ID)}
		}
		d.order = append(d.order, n.ID)
		d.deps[n.ID] = slices.Compact(slices.Sorted(slices.Values(n.DependsOn)))
		d.status[n.ID] = pb.SubagentStatus_SUBAGENT_STATUS_PENDING
	}
	for _, id := range d.order {
		for _, dep := range d.deps[id] {
			if _, ok := d.deps[dep]; !ok {
				return nil, &PlanError{Msg: fmt.Sprintf("step %q depends on unknown step %q", id, dep)}
			}
			d.dependents[dep] = append(d.dependents[dep], id)
		}
	}
	if cycle := d.cycle(); cycle != nil {
		return nil, &PlanError{Msg: "dependency cycle: " + strings.Join(cycle, " -> ")}
	}
	return d, nil
}

// cycle returns a dependency cycle (its first step repeated at the end),
// or nil. Steps are visited in request order, so the answer is stable.
func (d *dag) cycle() []string { return DependencyCycle(d.order, d.deps) }

// DependencyCycle returns a cycle of the dependency graph of steps (ids
// in order, each one's dependencies in deps) as the path "a", "b", "a" (a
// depends on b, b on a), or nil when there is none. Steps and their
// dependencies are visited in order, so the answer is stable. Clients
// check a plan with it before sending it.
func DependencyCycle(ids []string, deps map[string][]string) []string {
	const (
		unseen = iota
		onPath
		finished
	)
	state := map[string]int{}
	var path []string
	var visit func(id string) []string
	visit = func(id string) []string {
		state[id] = onPath
		path = append(path, id)
		for _, dep := range deps[id] {
			switch state[dep] {
			case onPath:
				i := slices.Index(path, dep)
				return append(slices.Clone(path[i:]), dep)
			case unseen:
				if c := visit(dep); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[id] = finished
		return nil
	}
	for _, id := range ids {
		if state[id] == unseen {
			if c := visit(id); c != nil {
				return c
			}
		}
	}
	return nil
}

// ready returns the PENDING steps whose dependencies all completed, in
// request order.
func (d *dag) ready() []string {
	var out []string
	for _, id := range d.order {
		if d.status[id] != pb.SubagentStatus_SUBAGENT_STATUS_PENDING {
			continue
		}
		ok := true
		for _, dep := range d.deps[id] {
			ok = ok && d.status[dep] == pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED
		}
		if ok {
			out = append(out, id)
		}
	}
	return out
}

// set records a step's status.
func (d *dag) set(id string, st pb.SubagentStatus) { d.status[id] = st }

// skipDependents marks every PENDING step that depends, directly or not,
// on id SKIPPED and returns them in request order.
func (d *dag) skipDependents(id string) []string {
	skip := map[string]bool{}
	var walk func(string)
	walk = func(id string) {
		for _, dep := range d.dependents[id] {
			if !skip[dep] && d.status[dep] == pb.SubagentStatus_SUBAGENT_STATUS_PENDING {
				skip[dep] = true
				walk(dep)
			}
		}
	}
	walk(id)
	var out []string
	for _, s := range d.order {
		if skip[s] {
			d.status[s] = pb.SubagentStatus_SUBAGENT_STATUS_SKIPPED
			out = append(out, s)
		}
	}
	return out
}

// pending returns the PENDING steps in request order.
func (d *dag) pending() []string {
	var out []string
	for _, id := range d.order {
		if d.status[id] == pb.SubagentStatus_SUBAGENT_STATUS_PENDING {
			out = append(out, id)
		}
	}
	return out
}

// allCompleted reports whether every step completed.
func (d *dag) allCompleted() bool {
	for _, st := range d.status {
		if st != pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED {
			return false
		}
	}
	return true
}

// terminal reports whether a subagent status is final.
func terminal(st pb.SubagentStatus) bool {
	switch st {
	case pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED, pb.SubagentStatus_SUBAGENT_STATUS_FAILED,
		pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED, pb.SubagentStatus_SUBAGENT_STATUS_SKIPPED:
		return true
	}
	return false
}
