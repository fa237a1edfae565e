package webapi

import (
	"context"
	"sync"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// sessionFeed shares one ResumeSession(follow) stream of a session among
// the subscriptions of a hub's sockets (one caller: same token and
// machine, so the same answers). A thousand browsers watching one session
// cost the agent, the relay and the tunnel one stream, not a thousand.
//
// Exactly once, in order: the feed has delivered every event up to seq to
// its subscribers, and delivers every later one to each subscriber that
// joined, skipping those at or before the subscriber's own last sequence.
// A subscription joins only once it has sent everything up to the feed's
// seq itself (from its own stream, which it then closes), so it sees no
// gap and no duplicate. Delivery never waits for a socket: one whose queue
// overflows is closed as too slow (socket.sendShared).
type sessionFeed struct {
	hub    *watchHub
	id     string
	cancel context.CancelFunc

	// hub.mu, then mu: the lock order.
	mu     sync.Mutex
	seq    uint64 // every event after seq reaches the subscribers
	closed bool   // no subscription may join any more
	subs   map[*subscription]struct{}
}

// tryJoin joins sub to its session's feed (starting one that follows from
// lastSent if there is none and sub has replayed up to last) when sub has
// sent everything the feed has delivered so far; false means sub must read
// on from its own stream.
// last is the sequence sub still owes replay_done for (pending says
// whether it does).
func (hub *watchHub) tryJoin(sub *subscription, lastSent, last uint64, pending bool) bool {
	hub.mu.Lock()
	if hub.closed {
		hub.mu.Unlock()
		return false
	}
	f := hub.feeds[sub.id]
	if f == nil && pending {
		// Replaying history: that goes at the socket's pace on its own
		// stream (send waits for room); a feed, which never waits, starts
		// only at the live end.
		hub.mu.Unlock()
		return false
	}
	if f == nil {
		ctx, cancel := context.WithCancel(hub.ctx)
		f = &sessionFeed{hub: hub, id: sub.id, cancel: cancel, seq: lastSent, subs: map[*subscription]struct{}{}}
		hub.feeds[sub.id] = f
		hub.h.hubWG.Add(1)
		go f.run(ctx, lastSent)
	}
	f.mu.Lock()
	hub.mu.Unlock()
	defer f.mu.Unlock()
	if f.closed || lastSent < f.seq {
		return false
	}
	sub.feed, sub.skip, sub.last, sub.pendingDone = f, lastSent, last, pending
	f.subs[sub] = struct{}{}
	if fn := hub.h.timing.feedChanged; fn != nil {
		fn()
	}
	return true
}

// leave removes sub; the last one out stops the feed.
func (f *sessionFeed) leave(sub *subscription) {
	f.hub.mu.Lock()
	f.mu.Lock()
	delete(f.subs, sub)
	last := len(f.subs) == 0 && !f.closed
	if last {
		f.closed = true
		if f.hub.feeds[f.id] == f {
			delete(f.hub.feeds, f.id)
		}
	}
	f.mu.Unlock()
	f.hub.mu.Unlock()
	if fn := f.hub.h.timing.feedChanged; fn != nil {
		fn()
	}
	if last {
		f.cancel()
	}
}

// run reads the stream from after and fans its events out. When the
// stream fails, every subscription of the feed ends (subscription_ended);
// when it was stopped (its last subscriber left, the hub stopped) nobody
// is told.
func (f *sessionFeed) run(ctx context.Context, after uint64) {
	defer f.hub.h.hubWG.Done()
	err := f.follow(ctx, after)
	f.hub.mu.Lock()
	f.mu.Lock()
	f.closed = true
	if f.hub.feeds[f.id] == f {
		delete(f.hub.feeds, f.id)
	}
	subs := f.subs
	f.subs = nil
	f.mu.Unlock()
	f.hub.mu.Unlock()
	f.cancel()
	if ctx.Err() != nil {
		return
	}
	for sub := range subs {
		sub.s.feedEnded(sub, err)
	}
}

// follow runs the stream until it fails or ctx ends.
func (f *sessionFeed) follow(ctx context.Context, after uint64) error {
	stream, err := f.hub.h.follow(ctx, f.id, after)
	if err != nil {
		return err
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			return err
		}
		f.deliver(ev)
	}
}

// deliver sends one event to every subscriber that has not had it, and
// replay_done to those that were waiting for it.
func (f *sessionFeed) deliver(ev *pb.AgentEvent) {
	var b []byte
	if e := eventOf(f.id, ev); e != nil {
		b = mustMarshal(e)
	}
	seq := ev.GetSequence()
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq <= f.seq {
		return // already delivered (a stream never repeats one; be safe)
	}
	f.seq = seq
	var done []byte
	for sub := range f.subs {
		if seq <= sub.skip {
			continue
		}
		if b != nil {
			sub.s.sendShared(b)
		}
		if sub.pendingDone && seq >= sub.last {
			sub.pendingDone = false
			if done == nil {
				done = mustMarshal(Event{"type": "replay_done", "sessionId": f.id, "seq": seq})
			}
			sub.s.sendShared(done)
		}
	}
}
