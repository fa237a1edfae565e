package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// TestResumingAnIdleSessionAnswersAtOnce: a client that reconnects to an
// idle session (nothing to replay, no turn running) gets the stream's
// response headers at once, so it knows it is connected again, rather than
// when the session's next event comes. The chaos soak measured "replica
// death to streaming again" in tens of seconds for idle sessions because
// of this.
func TestResumingAnIdleSessionAnswersAtOnce(t *testing.T) {
	a, client := startTestAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := a.mgr.Create(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := runTurn(ctx, s, "FLOOD 3"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		open openStream
	}{{"ResumeSession following", openResume}, {"Converse", openConverse}} {
		t.Run(tt.name, func(t *testing.T) {
			// Well before the session's next event: it has none coming.
			hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			st, err := tt.open(hctx, client, s.ID(), s.LastSeq(), grpc.EmptyCallOption{})
			if err != nil {
				t.Fatal(err)
			}
			// Header returns nil, nil for a stream that ended without any
			// (here: at the deadline).
			if md, err := st.Header(); err != nil || md == nil {
				t.Fatalf("no response headers from a stream resumed at the session's last event (err %v, stream %v)", err, st.RecvMsg(new(pb.AgentEvent)))
			}
		})
	}
}
