package client

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/cenkalti/backoff/v4"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Replay streams a session's events from req.FromSequence on
// (ResumeSession) to fn, reconnecting as Conversation does when the stream
// fails transiently (a relay replica draining, a dropped connection) and
// resuming after the last sequence fn got, so fn sees every event once. It
// returns nil when the agent ends the stream, fn's error, or a permanent
// failure. onReconnect, if set, is called before each attempt.
func Replay(ctx context.Context, api pb.AgentServiceClient, req *pb.ResumeSessionRequest, fn func(*pb.AgentEvent) error, onReconnect func(err error, wait time.Duration)) error {
	last := req.FromSequence
	var bo backoff.BackOff
	for {
		r := &pb.ResumeSessionRequest{SessionId: req.SessionId, FromSequence: last}
		stream, err := api.ResumeSession(ctx, r)
		for err == nil {
			var ev *pb.AgentEvent
			if ev, err = stream.Recv(); err != nil {
				break
			}
			bo = nil // the stream is back: a later failure starts over
			if ev.Sequence != 0 && ev.Sequence <= last {
				continue // a duplicate after a resume
			}
			if ev.Sequence != 0 {
				last = ev.Sequence
			}
			if ferr := fn(ev); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if !Retryable(err) || ctx.Err() != nil {
			return err
		}
		if bo == nil || RelayDraining(err) {
			bo = Backoff()
		}
		wait := nextWait(bo, err)
		if onReconnect != nil {
			onReconnect(err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
