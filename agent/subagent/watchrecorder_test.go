package subagent

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// watchRecorder is a WatchSubagent stream that records what it is sent.
type watchRecorder struct {
	grpc.ServerStream
	ctx  context.Context
	mu   sync.Mutex
	sent []*pb.WatchSubagentResponse
}

func (w *watchRecorder) Context() context.Context { return w.ctx }

func (w *watchRecorder) Send(r *pb.WatchSubagentResponse) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent = append(w.sent, proto.CloneOf(r)) // replayed events reuse one message
	return nil
}

func (w *watchRecorder) events() []*pb.AgentEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*pb.AgentEvent
	for _, r := range w.sent {
		if ev := r.GetAgentEvent(); ev != nil {
			out = append(out, ev)
		}
	}
	return out
}

func (w *watchRecorder) last() *pb.WatchSubagentResponse {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.sent) == 0 {
		return nil
	}
	return w.sent[len(w.sent)-1]
}
