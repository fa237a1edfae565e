package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/internal/wirecodec"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// published is a sequenced event as subscribers get it: the event and its
// wire encoding, proto.Marshal of it as the log stores it (nil if that
// failed). Both are shared by every subscriber and never modified; so is
// the published, which subscribers' buffers hold by pointer.
type published struct {
	ev   *pb.AgentEvent
	wire *wirecodec.Wire
}

// subscriber is one client's bounded live buffer.
type subscriber struct {
	ch       chan *published
	cutOnce  sync.Once
	cut      chan struct{}
	cutErr   error
	lastSeen uint64 // last sequence offered; written under the session's mu
}

func newSubscriber(n int) *subscriber {
	return &subscriber{ch: make(chan *published, n), cut: make(chan struct{})}
}

// offer never blocks: a full buffer cuts the subscriber off, and then
// offer reports true.
func (sub *subscriber) offer(p *published) (cut bool) {
	select {
	case <-sub.cut:
		return false
	default:
	}
	select {
	case sub.ch <- p:
		sub.lastSeen = p.ev.Sequence
		return false
	default:
		sub.stop(&SlowConsumerError{Buffer: cap(sub.ch)})
		return true
	}
}

func (sub *subscriber) stop(err error) {
	sub.cutOnce.Do(func() {
		sub.cutErr = err
		close(sub.cut)
	})
}

// subscribe registers a subscriber and returns it with the last committed
// sequence: later events reach it live.
func (s *Session) subscribe() (*subscriber, uint64) {
	sub := newSubscriber(s.m.cfg.SubscriberBuffer)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs[sub] = struct{}{}
	return sub, s.committed
}

func (s *Session) unsubscribe(sub *subscriber) {
	s.mu.Lock()
	delete(s.subs, sub)
	s.mu.Unlock()
}

func (s *Session) closeSubscribers(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		sub.stop(err)
	}
}

// StreamOptions control Stream.
type StreamOptions struct {
	// From: events with a sequence above it are sent (0 = everything).
	From uint64
	// UntilIdle ends the stream once every event up to the session being
	// idle has been sent: at once after replay when no turn runs, else after
	// the running turn's TurnComplete.
	UntilIdle bool
	// Wake, when it receives, makes Stream re-check StopWhenIdle.
	Wake <-chan struct{}
	// StopWhenIdle is consulted on Wake and after each live event; when it
	// returns true Stream behaves as with UntilIdle from then on.
	StopWhenIdle func() bool
	// OnCut, if set, is called (from another goroutine) as soon as the
	// client is cut off, with the reason (ErrSlowConsumer for falling
	// behind, ErrClosed at shutdown), so the caller can abort a send that is
	// blocked on a stalled client. Stream returns the same reason once send
	// returns.
	OnCut func(reason error)
}

// Stream sends the session's events with sequence > opt.From to send, first
// from the log, then live, with no gap and no duplicate. It returns nil when
// UntilIdle is satisfied, ctx.Err() when ctx ends, a *SlowConsumerError when
// the client fell behind, ErrClosed when the agent shuts down and
// ErrNotFound when the session is deleted. The event
// passed to send is only valid during the call (replayed events reuse one
// message); send must not modify it.
func (s *Session) Stream(ctx context.Context, opt StreamOptions, send func(*pb.AgentEvent) error) error {
	return s.StreamEncoded(ctx, opt, func(ev *pb.AgentEvent, _ *wirecodec.Wire) error { return send(ev) })
}

// StreamEncoded is Stream for a sender that can use an event's wire
// encoding, such as a gRPC stream: send also gets wire, the bytes
// proto.Marshal gave for ev when it was emitted (the log's payload; the same
// message, sequence and timestamp), or nil when there are none at hand
// (replayed events, the compacted-history snapshot), and then the sender
// marshals ev itself. Live events are marshaled once, when emitted, and
// every subscriber gets the same wire: send must not modify it, but may
// keep it after it returns (it is never reused), as gRPC's transport does
// until it has written it.
func (s *Session) StreamEncoded(ctx context.Context, opt StreamOptions, send func(ev *pb.AgentEvent, wire *wirecodec.Wire) error) error {
	sub, snapshot := s.subscribe()
	defer s.unsubscribe(sub)
	if s.deleted.Load() {
		// Set before Delete cuts the subscribers off: either this
		// subscriber was cut, or it sees the flag.
		return ErrNotFound
	}
	if opt.OnCut != nil {
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-sub.cut:
				opt.OnCut(sub.cutErr)
			case <-done:
			}
		}()
	}
	last := opt.From
	s.mu.Lock()
	boundary := s.meta.CompactionSeq
	s.mu.Unlock()
	if boundary > 1 && last+1 < boundary && last < snapshot {
		// The events before the boundary were compacted away.
		if err := send(s.compactedSnapshot(boundary), nil); err != nil {
			return err
		}
		last = boundary - 1
	}
	cutErr := func() error {
		if sc, ok := sub.cutErr.(*SlowConsumerError); ok {
			return &SlowConsumerError{LastSeq: last, Buffer: sc.Buffer}
		}
		return sub.cutErr
	}
	if last < snapshot {
		start, from := time.Now(), last
		var ev pb.AgentEvent
		err := s.m.log.Since(ctx, s.id, last, func(e eventlog.Event) error {
			if e.Seq > snapshot {
				return errStopReplay
			}
			select {
			case <-sub.cut:
				return cutErr()
			default:
			}
			ev.Reset()
			if err := proto.Unmarshal(e.Payload, &ev); err != nil {
				return fmt.Errorf("decode event %d: %w", e.Seq, err)
			}
			// e.Payload is the driver's buffer, reused for the next row:
			// it cannot be handed to a sender that may keep it.
			if err := send(&ev, nil); err != nil {
				return err
			}
			last = e.Seq
			return nil
		})
		s.m.cfg.Metrics.replayed(int(last-from), time.Since(start))
		if err != nil && !errors.Is(err, errStopReplay) {
			return err
		}
	}
	untilIdle := opt.UntilIdle
	done := func() bool {
		if !untilIdle && opt.StopWhenIdle != nil && opt.StopWhenIdle() {
			untilIdle = true
		}
		if !untilIdle {
			return false
		}
		committed, idle := s.idleAt()
		return idle && last >= committed
	}
	// deliver sends a live event unless replay already sent it.
	deliver := func(p *published) error {
		ev := p.ev
		if ev.Sequence <= last {
			return nil
		}
		if err := send(ev, p.wire); err != nil {
			return err
		}
		s.m.cfg.Metrics.sentLive(ev, time.Now())
		last = ev.Sequence
		return nil
	}
	for {
		if done() {
			return nil
		}
		select {
		case p := <-sub.ch:
			if err := deliver(p); err != nil {
				return err
			}
		case <-sub.cut:
			// Deliver what is buffered before reporting the cut.
			for {
				select {
				case p := <-sub.ch:
					if err := deliver(p); err != nil {
						return err
					}
				default:
					return cutErr()
				}
			}
		case <-opt.Wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

var errStopReplay = errors.New("stop replay")
