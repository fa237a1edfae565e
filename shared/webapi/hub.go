package webapi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"

	"github.com/coder/websocket"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// watchHub shares one WatchSessions stream among the WebSockets of one
// caller: the same token and machine, so the same answers. A socket costs
// the agent (and the relay) no stream of its own, which keeps a thousand
// idle phones cheap. Each socket still checks its token with its own call
// before it joins (the snapshot's permission rules), so a revoked token
// cannot ride on another socket's stream.
type watchHub struct {
	h       *Handler
	key     [32]byte
	machine string
	ctx     context.Context // the stream's; carries the credentials
	cancel  context.CancelFunc
	ready   chan struct{} // closed once the snapshot is read or the stream failed

	mu       sync.Mutex // guards the fields below
	err      error      // why the stream failed; set before ready closes or when it ends
	closed   bool       // no socket may join any more
	sessions map[string]*hubSession
	subs     map[*socket]struct{}
	waiters  int                     // sockets waiting for ready
	feeds    map[string]*sessionFeed // by session id: the subscriptions' shared streams
	rules    []PermissionRule        // the machine's, for snapshots
}

// hubSession is what a hub knows of one session.
type hubSession struct {
	sess    Session
	pending []string // open request and question ids
}

func hubKey(c caller) [32]byte {
	return sha256.Sum256([]byte(c.token + "\x00" + c.machine))
}

// join adds s to the hub of its caller (starting one if needed) and queues
// s's snapshot, built with rules and machine, before any update. It
// returns the stream's error when the hub failed.
func (h *Handler) join(s *socket, c caller, snap Event) error {
	key := hubKey(c)
	for {
		h.hubsMu.Lock()
		hub := h.hubs[key]
		if hub == nil {
			ctx, cancel := context.WithCancel(h.outgoing(h.ctx, c))
			hub = &watchHub{h: h, key: key, machine: c.machine, ctx: ctx, cancel: cancel, ready: make(chan struct{}),
				sessions: map[string]*hubSession{}, subs: map[*socket]struct{}{}, feeds: map[string]*sessionFeed{}}
			h.hubs[key] = hub
			h.hubWG.Add(1)
			go hub.run()
		}
		hub.mu.Lock()
		hub.waiters++
		hub.mu.Unlock()
		h.hubsMu.Unlock()
		select {
		case <-hub.ready:
		case <-s.ctx.Done():
		}
		hub.mu.Lock()
		hub.waiters--
		if s.ctx.Err() != nil {
			// Gone while waiting; the last one out stops the hub.
			last := hub.waiters == 0 && len(hub.subs) == 0 && !hub.closed
			if last {
				hub.closed = true
			}
			hub.mu.Unlock()
			if last {
				hub.stop()
			}
			return s.ctx.Err()
		}
		if hub.err != nil {
			err := hub.err
			hub.mu.Unlock()
			return err
		}
		if hub.closed {
			// The last socket left as this one came: start over.
			hub.mu.Unlock()
			h.hubsMu.Lock()
			if h.hubs[key] == hub {
				delete(h.hubs, key)
			}
			h.hubsMu.Unlock()
			continue
		}
		sessions := make([]Session, 0, len(hub.sessions))
		for _, hs := range hub.sessions {
			sessions = append(sessions, hs.sess)
		}
		sortSessions(sessions)
		snap["sessions"], snap["permissionRules"] = sessions, hub.rules
		s.trySend(snap) // the queue is empty: it fits
		hub.subs[s] = struct{}{}
		s.hub = hub
		hub.mu.Unlock()
		return nil
	}
}

// leave removes s; the last socket to leave stops the hub.
func (hub *watchHub) leave(s *socket) {
	hub.mu.Lock()
	delete(hub.subs, s)
	last := len(hub.subs) == 0 && hub.waiters == 0 && !hub.closed
	if last {
		hub.closed = true
	}
	hub.mu.Unlock()
	if last {
		hub.stop()
	}
}

// stop ends the stream and forgets the hub.
func (hub *watchHub) stop() {
	hub.h.hubsMu.Lock()
	if hub.h.hubs[hub.key] == hub {
		delete(hub.h.hubs, hub.key)
	}
	hub.h.hubsMu.Unlock()
	hub.cancel()
}

// run reads the stream: the snapshot, then updates fanned out to the
// sockets. When the stream fails every socket gets an error and is closed
// (1012), so that its client reconnects for a fresh snapshot rather than
// keep a list with a hole.
func (hub *watchHub) run() {
	defer hub.h.hubWG.Done()
	err := hub.watch()
	stopped := hub.ctx.Err() != nil
	hub.stop()
	hub.mu.Lock()
	hub.closed = true
	if hub.err == nil {
		hub.err = err
	}
	subs := hub.subs
	hub.subs = nil
	select {
	case <-hub.ready:
	default:
		close(hub.ready)
	}
	hub.mu.Unlock()
	if stopped {
		// Stopped: the last socket left, or the handler is closing (its
		// sockets close with 1001 on their own).
		return
	}
	e := fromGRPC(err)
	msg := mustMarshal(withRetryAfter(Event{"type": "error", "code": e.code, "message": "session list updates stopped: " + e.message}, e))
	for s := range subs {
		s.trySendBytes(msg)
		s.fail(websocket.StatusServiceRestart, "session list updates stopped")
	}
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only the package's own maps of plain values are marshalled
	}
	return b
}

// watch runs the stream until it fails or the hub stops.
func (hub *watchHub) watch() error {
	stream, err := hub.h.agent.WatchSessions(hub.ctx, &pb.WatchSessionsRequest{})
	if err != nil {
		return err
	}
	snapshotDone := false
	for {
		u, err := stream.Recv()
		if status.Code(err) == codes.Unimplemented && !snapshotDone {
			return hub.static()
		}
		if err != nil {
			return err
		}
		if u.SnapshotDone {
			if !snapshotDone {
				snapshotDone = true
				hub.loadRules()
				close(hub.ready)
			}
			continue
		}
		if u.Session == nil {
			continue
		}
		hub.apply(u)
	}
}

// static serves an agent older than WatchSessions: a snapshot from
// ListSessions, no live list.
func (hub *watchHub) static() error {
	all, err := hub.h.allSessions(hub.ctx)
	if err != nil {
		return err
	}
	hub.mu.Lock()
	for _, x := range all {
		hub.sessions[x.Id] = &hubSession{sess: sessionOf(x, nil)}
	}
	hub.mu.Unlock()
	hub.loadRules()
	close(hub.ready)
	<-hub.ctx.Done()
	return hub.ctx.Err()
}

// loadRules reads the machine's permission rules for the snapshots;
// without them (a relay user who may not read them) snapshots show none.
func (hub *watchHub) loadRules() {
	rules, err := hub.h.rules(hub.ctx)
	if err != nil {
		hub.h.opts.Log.Warn("web: permission rules for the snapshot", "err", err)
		rules = []PermissionRule{}
	}
	hub.mu.Lock()
	hub.rules = rules
	hub.mu.Unlock()
}

// apply records an update and sends its messages to every socket.
func (hub *watchHub) apply(u *pb.SessionUpdate) {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	id := u.Session.Id
	snapshot := false
	select {
	case <-hub.ready:
	default:
		snapshot = true
	}
	if u.Deleted {
		delete(hub.sessions, id)
		if !snapshot {
			hub.broadcast(Event{"type": "session_deleted", "sessionId": id})
		}
		return
	}
	sess := sessionOf(u.Session, u.Pending)
	pend := pendingIDs(u.Pending)
	old, seen := hub.sessions[id]
	hub.sessions[id] = &hubSession{sess: sess, pending: pend}
	if snapshot {
		return
	}
	if !seen {
		hub.broadcast(Event{"type": "session_created", "session": sess})
		return
	}
	hub.broadcast(Event{"type": "session_updated", "session": sess})
	for _, rid := range old.pending {
		if !contains(pend, rid) {
			hub.broadcast(Event{"type": "permission_resolved", "sessionId": id, "requestId": rid})
		}
	}
	switch u.GetCause().GetEvent().(type) {
	case *pb.AgentEvent_StatusChange, *pb.AgentEvent_TurnComplete:
		hub.broadcast(Event{"type": "session_status", "sessionId": id, "status": sess.Status, "agentStatus": sess.AgentStatus})
	case *pb.AgentEvent_Usage:
		hub.broadcast(Event{"type": "cost_update", "sessionId": id, "costUsd": sess.CostUSD,
			"inputTokens": sess.InputTokens, "outputTokens": sess.OutputTokens})
	}
}

// broadcast queues a message on every socket without waiting: a socket
// whose queue is full is closed as too slow rather than holding up the
// others. hub.mu is held.
func (hub *watchHub) broadcast(e Event) {
	if len(hub.subs) == 0 {
		return
	}
	b := mustMarshal(e)
	for s := range hub.subs {
		s.trySendBytes(b)
	}
}
