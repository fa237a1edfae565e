package subagent

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func n(id string, deps ...string) node { return node{ID: id, DependsOn: deps} }

func TestNewDAGValidates(t *testing.T) {
	tests := []struct {
		name  string
		nodes []node
		want  string // error text; "" = valid
	}{
		{"chain", []node{n("a"), n("b", "a"), n("c", "b")}, ""},
		{"diamond", []node{n("a"), n("b", "a"), n("c", "a"), n("d", "b", "c")}, ""},
		{"dependency listed twice", []node{n("a"), n("b", "a", "a")}, ""},
		{"no steps", nil, "the orchestration has no steps"},
		{"step without id", []node{n("a"), n("")}, "step 2 has no id"},
		{"duplicate id", []node{n("a"), n("a")}, `step id "a" is used twice`},
		{"unknown dependency", []node{n("a"), n("b", "x")}, `step "b" depends on unknown step "x"`},
		{"self dependency", []node{n("a", "a")}, "dependency cycle: a -> a"},
		{"two-step cycle", []node{n("a", "b"), n("b", "a")}, "dependency cycle: a -> b -> a"},
		{"cycle behind a valid step", []node{n("root"), n("x", "root", "z"), n("y", "x"), n("z", "y")}, "dependency cycle: x -> z -> y -> x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newDAG(tt.nodes)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("newDAG: %v", err)
				}
				return
			}
			var perr *PlanError
			if !errors.As(err, &perr) || perr.Msg != tt.want {
				t.Fatalf("newDAG error %v, want PlanError %q", err, tt.want)
			}
		})
	}
}

// simulate runs the plan in waves: each wave starts up to limit ready
// steps and ends them all (those in fails fail).
func simulate(t *testing.T, d *dag, limit int, fails map[string]bool) [][]string {
	t.Helper()
	var waves [][]string
	for {
		ready := d.ready()
		if len(ready) == 0 {
			return waves
		}
		wave := ready[:min(limit, len(ready))]
		for _, id := range wave {
			d.set(id, pb.SubagentStatus_SUBAGENT_STATUS_RUNNING)
		}
		for _, id := range wave {
			if fails[id] {
				d.set(id, pb.SubagentStatus_SUBAGENT_STATUS_FAILED)
				d.skipDependents(id)
			} else {
				d.set(id, pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED)
			}
		}
		waves = append(waves, slices.Clone(wave))
	}
}

func TestDAGSchedule(t *testing.T) {
	const (
		done    = pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED
		failed  = pb.SubagentStatus_SUBAGENT_STATUS_FAILED
		skipped = pb.SubagentStatus_SUBAGENT_STATUS_SKIPPED
	)
	tests := []struct {
		name   string
		nodes  []node
		limit  int
		fails  []string
		waves  string // waves separated by " | "
		status map[string]pb.SubagentStatus
	}{
		{name: "independent steps together", nodes: []node{n("a"), n("b"), n("c")}, limit: 3, waves: "a b c"},
		{name: "concurrency limit", nodes: []node{n("a"), n("b"), n("c"), n("d"), n("e")}, limit: 2, waves: "a b | c d | e"},
		{name: "third after the first two", nodes: []node{n("a"), n("b"), n("c", "a", "b")}, limit: 4, waves: "a b | c"},
		{name: "diamond", nodes: []node{n("a"), n("b", "a"), n("c", "a"), n("d", "b", "c")}, limit: 4, waves: "a | b c | d"},
		{name: "request order", nodes: []node{n("c", "a"), n("a"), n("b")}, limit: 4, waves: "a b | c"},
		{name: "limit 1 is sequential", nodes: []node{n("a"), n("b", "a"), n("c")}, limit: 1, waves: "a | b | c"},
		{
			name: "failure skips dependents only", nodes: []node{n("a"), n("b", "a"), n("c", "b"), n("d")}, limit: 4,
			fails: []string{"a"}, waves: "a d",
			status: map[string]pb.SubagentStatus{"a": failed, "b": skipped, "c": skipped, "d": done},
		},
		{
			name: "one failed dependency is enough", nodes: []node{n("a"), n("b"), n("c", "a", "b")}, limit: 4,
			fails: []string{"b"}, waves: "a b",
			status: map[string]pb.SubagentStatus{"a": done, "b": failed, "c": skipped},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := newDAG(tt.nodes)
			if err != nil {
				t.Fatal(err)
			}
			fails := map[string]bool{}
			for _, f := range tt.fails {
				fails[f] = true
			}
			var got []string
			for _, w := range simulate(t, d, tt.limit, fails) {
				got = append(got, strings.Join(w, " "))
			}
			if s := strings.Join(got, " | "); s != tt.waves {
				t.Fatalf("waves %q, want %q", s, tt.waves)
			}
			if tt.status != nil && !maps.Equal(d.status, tt.status) {
				t.Fatalf("statuses %v, want %v", d.status, tt.status)
			}
			if tt.status == nil && !d.allCompleted() {
				t.Fatalf("not all completed: %v", d.status)
			}
		})
	}
}
