package client

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Backoff returns the reconnection schedule of the spec: 100 ms doubling to
// 30 s, with jitter; it never gives up by itself (the caller's context does).
func Backoff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 100 * time.Millisecond
	b.Multiplier = 2
	b.RandomizationFactor = 0.2
	b.MaxInterval = 30 * time.Second
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

// Conversation is a Converse stream that survives drops.
type Conversation struct {
	api   pb.AgentServiceClient
	start *pb.StartConversation
	// OnReconnect, if set, is called before each reconnection attempt.
	OnReconnect func(err error, wait time.Duration)

	mu        sync.Mutex
	stream    grpc.BidiStreamingClient[pb.AgentRequest, pb.AgentEvent]
	cancel    context.CancelFunc
	sessionID string
	lastSeq   uint64
	closed    bool
}

// Start opens a conversation: a new session when start.SessionId is empty,
// else an attachment to that session from sequence from.
func Start(ctx context.Context, api pb.AgentServiceClient, start *pb.StartConversation, from uint64) (*Conversation, error) {
	c := &Conversation{api: api, start: start, sessionID: start.SessionId, lastSeq: from}
	if err := c.open(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// SessionID returns the session's id (known once SessionInfo arrived for a
// new session).
func (c *Conversation) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// LastSeq returns the last sequence received.
func (c *Conversation) LastSeq() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastSeq
}

func (c *Conversation) open(ctx context.Context) error {
	c.mu.Lock()
	start := c.start
	if c.stream != nil && c.sessionID != "" { // a reconnection: resume
		start = &pb.StartConversation{
			SessionId: c.sessionID, WorkingDirectory: c.start.WorkingDirectory, Model: c.start.Model,
			Metadata: map[string]string{"from_sequence": strconv.FormatUint(c.lastSeq, 10)},
		}
	}
	c.mu.Unlock()
	sctx, cancel := context.WithCancel(ctx)
	stream, err := c.api.Converse(sctx)
	if err != nil {
		cancel()
		return err
	}
	if err := stream.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: start}}); err != nil {
		cancel()
		return err
	}
	c.mu.Lock()
	if c.cancel != nil {
		c.cancel()
	}
	c.stream, c.cancel = stream, cancel
	c.mu.Unlock()
	return nil
}

// Send sends a request on the current stream. When the stream is broken it
// returns the stream's error (io.EOF); Recv reconnects, and the caller sends
// again if the request still matters.
func (c *Conversation) Send(req *pb.AgentRequest) error {
	c.mu.Lock()
	s := c.stream
	c.mu.Unlock()
	return s.Send(req)
}

// CloseSend half-closes: the agent ends the stream once the running turn is
// complete.
func (c *Conversation) CloseSend() error {
	c.mu.Lock()
	s := c.stream
	c.closed = true
	c.mu.Unlock()
	return s.CloseSend()
}

// Close cancels the stream.
func (c *Conversation) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.cancel != nil {
		c.cancel()
	}
}

// Recv returns the next event, reconnecting and resuming transparently on
// transient failures. It returns io.EOF when the agent ended the stream
// normally, and a status error for permanent failures.
func (c *Conversation) Recv(ctx context.Context) (*pb.AgentEvent, error) {
	var bo backoff.BackOff
	for {
		c.mu.Lock()
		s := c.stream
		c.mu.Unlock()
		ev, err := s.Recv()
		if err == nil {
			c.mu.Lock()
			if ev.Sequence != 0 && ev.Sequence <= c.lastSeq {
				c.mu.Unlock()
				continue // duplicate after a resume
			}
			if ev.Sequence != 0 {
				c.lastSeq = ev.Sequence
			}
			if si := ev.GetSessionInfo(); si != nil && c.sessionID == "" {
				c.sessionID = si.SessionId
			}
			c.mu.Unlock()
			return ev, nil
		}
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		if !Retryable(err) || ctx.Err() != nil {
			return nil, err
		}
		c.mu.Lock()
		canResume := c.sessionID != "" && !c.closed
		c.mu.Unlock()
		if !canResume {
			return nil, err
		}
		if bo == nil || RelayDraining(err) {
			// A relay replica going away for a deploy is no failure: the
			// schedule starts over (100 ms), on a new connection that
			// lands on another replica.
			bo = Backoff()
		}
		for {
			wait := nextWait(bo, err)
			if c.OnReconnect != nil {
				c.OnReconnect(err, wait)
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			if err = c.open(ctx); err == nil {
				break
			}
			if !Retryable(err) {
				return nil, err
			}
		}
	}
}

// CodeRelayDraining is the BetCode error code of a call a relay replica
// refused or ended because it shuts down (a deploy): retry at once, on a
// new connection, and resume from the last sequence seen.
const CodeRelayDraining = "RELAY_DRAINING"

// RelayDraining reports whether err is UNAVAILABLE / RELAY_DRAINING.
func RelayDraining(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Reason == CodeRelayDraining {
			return true
		}
	}
	return false
}

// maxRetryAfter bounds the wait a failure may ask for.
const maxRetryAfter = 30 * time.Second

// RetryAfter returns the wait a failure asks for, in its ErrorInfo's
// retry_after_ms (a rate limit's; a machine that was connected moments ago
// and is moving between relay replicas, which the relay answers with a
// short one), at most 30 s; ok is false when it asks none.
func RetryAfter(err error) (wait time.Duration, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus || err == nil {
		return 0, false
	}
	for _, d := range st.Details() {
		info, isInfo := d.(*errdetails.ErrorInfo)
		if !isInfo {
			continue
		}
		ms, perr := strconv.ParseInt(info.GetMetadata()["retry_after_ms"], 10, 64)
		if perr != nil || ms < 0 {
			continue
		}
		return min(time.Duration(ms)*time.Millisecond, maxRetryAfter), true
	}
	return 0, false
}

// nextWait is the wait before the next try after err: what err asks for
// (RetryAfter), which does not advance bo, else bo's next step.
func nextWait(bo backoff.BackOff, err error) time.Duration {
	if d, ok := RetryAfter(err); ok {
		return d
	}
	return bo.NextBackOff()
}

// Retryable reports whether a stream error is worth a reconnect: the agent
// or the network went away, or this client fell behind.
func Retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.Internal, codes.Unknown:
		return true
	}
	return false
}
