package e2e

import (
	"context"
	"fmt"
	"testing"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// checkListedAs fails unless ListSessions lists session id as run by kind.
func checkListedAs(t *testing.T, ctx context.Context, api pb.AgentServiceClient, id string, kind pb.SessionProvider) {
	t.Helper()
	l, err := api.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ss := range l.Sessions {
		if ss.Id == id {
			if ss.Provider != kind {
				t.Errorf("ListSessions provider = %v, want %v", ss.Provider, kind)
			}
			return
		}
	}
	t.Fatalf("session %s not listed", id)
}

// checkReplay fails unless ResumeSession replays exactly the events all
// (as a client received them live) with their sequences, contiguous.
func checkReplay(t *testing.T, ctx context.Context, api pb.AgentServiceClient, id string, all []*pb.AgentEvent) {
	t.Helper()
	r, err := api.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	replayed := until(t, r, func(ev *pb.AgentEvent) bool { return ev.Sequence >= last(all).Sequence })
	if len(replayed) != len(all) {
		t.Fatalf("replayed %d events, want %d", len(replayed), len(all))
	}
	checkSequences(t, replayed, 0)
	for i := range all {
		if fmt.Sprintf("%T", replayed[i].Event) != fmt.Sprintf("%T", all[i].Event) || replayed[i].Sequence != all[i].Sequence {
			t.Fatalf("replayed event %d = %v, want %v", i, replayed[i], all[i])
		}
	}
	if err := r.CloseSend(); err != nil {
		t.Fatal(err)
	}
}
