package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
)

func testAudit(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	events := []store.AuditEvent{
		{Actor: "alice", Action: "token.created", Target: "t1", Remote: "203.0.113.7:5000", Outcome: "ok"},
		{Actor: "", Action: "auth.refused", Target: "alice", Remote: "198.51.100.1:4000", Outcome: "denied", Detail: "revoked token"},
		{Actor: "admin-cli", Action: "user.disabled", Target: "bob", Outcome: "ok"},
		{Actor: "bob", Action: "machine.revoked", Target: "m1", Outcome: "ok"},
		{Actor: "alice", Action: "member.added", Target: "red", Outcome: "error", Detail: "unknown user"},
	}
	for i := range events {
		events[i].At = base.Add(time.Duration(i) * time.Minute)
	}
	// Stored out of order: the log is ordered by At.
	for _, i := range []int{0, 1, 4, 2, 3} {
		must(t, s.AppendAudit(ctx, events[i]))
	}

	tests := []struct {
		name string
		f    store.AuditFilter
		want []int // indexes into events, oldest first
	}{
		{"everything", store.AuditFilter{}, []int{0, 1, 2, 3, 4}},
		{"since", store.AuditFilter{Since: events[2].At}, []int{2, 3, 4}},
		{"since between", store.AuditFilter{Since: events[2].At.Add(time.Second)}, []int{3, 4}},
		{"actor or target", store.AuditFilter{Actor: "alice"}, []int{0, 1, 4}},
		{"target only", store.AuditFilter{Actor: "bob"}, []int{2, 3}},
		{"limit keeps the newest", store.AuditFilter{Limit: 2}, []int{3, 4}},
		{"all filters", store.AuditFilter{Since: events[1].At, Actor: "alice", Limit: 1}, []int{4}},
		{"nothing", store.AuditFilter{Actor: "nobody"}, nil},
	}
	for _, tt := range tests {
		got, err := s.ListAudit(ctx, tt.f)
		if err != nil {
			t.Errorf("ListAudit(%s): %v", tt.name, err)
			continue
		}
		var want []store.AuditEvent
		for _, i := range tt.want {
			want = append(want, events[i])
		}
		if !slices.EqualFunc(got, want, equalAudit) {
			t.Errorf("ListAudit(%s) = %+v; want %+v", tt.name, got, want)
		}
		for _, e := range got {
			if e.ID <= 0 {
				t.Errorf("ListAudit(%s): event %+v has no id", tt.name, e)
			}
		}
	}

	// A zero At means now; ids increase.
	before := time.Now().Add(-time.Second)
	must(t, s.AppendAudit(ctx, store.AuditEvent{Action: "relay.started", Outcome: "ok"}))
	got, err := s.ListAudit(ctx, store.AuditFilter{Limit: 2})
	if err != nil || len(got) != 2 || got[1].Action != "relay.started" || got[1].At.Before(before) || got[1].ID <= got[0].ID {
		t.Errorf("after appending an event without At ListAudit = %+v, %v; want it last, at now, with a larger id", got, err)
	}
}

func equalAudit(a, b store.AuditEvent) bool {
	return sameTime(a.At, b.At) && a.Actor == b.Actor && a.Action == b.Action && a.Target == b.Target &&
		a.Remote == b.Remote && a.Outcome == b.Outcome && a.Detail == b.Detail
}
