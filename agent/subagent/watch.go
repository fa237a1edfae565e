package subagent

import (
	"context"
	"sync"

	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// WatchSubagent streams the subagent's status changes and its session's
// events with sequence > from_sequence, ending with the terminal status
// change once every event of the subagent's turn was sent.
func (s *Service) WatchSubagent(req *pb.WatchSubagentRequest, stream pb.SubagentService_WatchSubagentServer) error {
	sa, err := s.subagent(req.GetSubagentId())
	if err != nil {
		return err
	}
	sess := sa.sess
	if sess == nil {
		// Restored from the store: its session is in the event log.
		if sess, err = s.m.Get(stream.Context(), sa.sessionID); err != nil {
			return sessionStatus(err, "subagent session "+sa.sessionID)
		}
	}
	ctx, cancel := context.WithCancel(stream.Context())
	var sendMu sync.Mutex // two goroutines send
	send := func(r *pb.WatchSubagentResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		r.SubagentId = sa.id
		return stream.Send(r)
	}
	events := make(chan error, 1)
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	wg.Add(2)
	go func() {
		defer wg.Done()
		select {
		case <-sa.done:
			wake <- struct{}{}
		case <-ctx.Done():
		}
	}()
	go func() {
		defer wg.Done()
		events <- sess.Stream(ctx, session.StreamOptions{From: req.GetFromSequence(), Wake: wake, StopWhenIdle: sa.isTerminal},
			func(ev *pb.AgentEvent) error {
				return send(&pb.WatchSubagentResponse{Event: &pb.WatchSubagentResponse_AgentEvent{AgentEvent: ev}})
			})
	}()
	next := 0
	eventsDone := false
	for {
		changes, changed := sa.changesFrom(next)
		next += len(changes)
		for _, c := range changes {
			if terminal(c.GetStatus()) {
				// The terminal change comes last, after the turn's events.
				if !eventsDone {
					select {
					case err := <-events:
						if err != nil {
							return sessionStatus(err, "watch subagent")
						}
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				return send(&pb.WatchSubagentResponse{Event: &pb.WatchSubagentResponse_StatusChange{StatusChange: c}})
			}
			if err := send(&pb.WatchSubagentResponse{Event: &pb.WatchSubagentResponse_StatusChange{StatusChange: c}}); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case err := <-events:
			if err != nil {
				return sessionStatus(err, "watch subagent")
			}
			// Stream ends without error only once the subagent is
			// terminal: its change is there on the next round.
			eventsDone = true
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
