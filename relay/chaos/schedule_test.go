package chaos

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestSchedule: a seed gives the same schedule every time, another seed
// another; every kind appears in a long enough run; replica faults never
// overlap; targets are in range.
func TestSchedule(t *testing.T) {
	p := Plan{Seed: 42, Duration: 90 * time.Second, Replicas: 3, Agents: 10, Clients: 5}
	a, b := Schedule(p), Schedule(p)
	if !slices.Equal(a, b) {
		t.Fatalf("seed 42 gave two schedules:\n%s\n%s", Format(42, a), Format(42, b))
	}
	p2 := p
	p2.Seed = 43
	if slices.Equal(a, Schedule(p2)) {
		t.Fatal("seeds 42 and 43 gave the same schedule")
	}
	seen := map[Kind]bool{}
	var replicaEnd time.Duration
	for _, f := range a {
		seen[f.Kind] = true
		if f.At >= p.Duration {
			t.Errorf("%v starts after the run's %s", f, p.Duration)
		}
		switch f.Kind {
		case ReplicaKill, ReplicaDrain:
			if f.Target < 0 || f.Target >= p.Replicas {
				t.Errorf("%v: no such replica", f)
			}
			if f.At < replicaEnd {
				t.Errorf("%v overlaps the previous replica fault (over at %s)", f, replicaEnd)
			}
			replicaEnd = f.End()
		case AgentKill, TunnelBlackhole, Bandwidth, Slicer, ResetPeer:
			if f.Target < 0 || f.Target >= p.Agents {
				t.Errorf("%v: no such agent", f)
			}
		case ClientStall:
			if f.Target < 0 || f.Target >= p.Clients {
				t.Errorf("%v: no such client", f)
			}
		}
	}
	for _, k := range Kinds {
		if !seen[k] {
			t.Errorf("no %s in 90 s:\n%s", k, Format(42, a))
		}
	}
}

// TestFaultTargetIsItsMachine: target i of the schedule is machine i
// whatever order the agents finished starting in (they start eight at a
// time), so that a replayed seed hits the same machines and a recovery is
// matched with the faults on its own machine. Before, target i was the i-th
// agent to finish starting.
func TestFaultTargetIsItsMachine(t *testing.T) {
	w := &world{}
	for _, i := range []int{3, 0, 2, 1} { // the order they finished in
		w.agents = append(w.agents, &agentProc{idx: i, id: fmt.Sprintf("m%03d", i)})
	}
	w.agents = append(w.agents, &agentProc{idx: 0, enroll: true, id: "e0"}) // enrolled during the run
	fr := &faultRunner{w: w}
	for i := range 4 {
		if got, want := fr.agent(i).id, fmt.Sprintf("m%03d", i); got != want {
			t.Errorf("target %d is %s, want %s", i, got, want)
		}
	}
}
