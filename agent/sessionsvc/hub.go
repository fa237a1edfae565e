package sessionsvc

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// hub is the table of session statuses and the fan-out of their changes.
type hub struct {
	m   *session.Manager
	now func() time.Time

	mu        sync.Mutex
	last      map[string]pb.SessionStatus // last status announced
	dirs      map[string]string           // cleaned working directory
	transient map[string]pb.SessionStatus // CREATED, STARTING, STOPPING held by an RPC
	terminal  map[string]pb.SessionStatus // STOPPED / FAILED marks
	markSeq   map[string]uint64           // the session's last sequence when it was marked
	subs      map[*statusSub]struct{}
	closed    bool
	buffer    int
}

// statusSub is one watch stream's bounded buffer.
type statusSub struct {
	id, dir string // filters ("" = all)
	ch      chan *pb.SessionStatusEvent
	once    sync.Once
	cut     chan struct{}
	err     error
}

func (s *statusSub) stop(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.cut)
	})
}

// errWatchOverflow ends a watcher that fell too far behind.
var errWatchOverflow = errors.New("watcher fell too far behind")

func newHub(m *session.Manager, buffer int, now func() time.Time) *hub {
	return &hub{m: m, now: now, buffer: buffer,
		last: map[string]pb.SessionStatus{}, dirs: map[string]string{},
		transient: map[string]pb.SessionStatus{}, terminal: map[string]pb.SessionStatus{}, markSeq: map[string]uint64{},
		subs: map[*statusSub]struct{}{}}
}

// seed loads the stopped/failed marks of stored sessions.
func (h *hub) seed(ctx context.Context) error {
	list, _, err := h.m.List(ctx, eventlog.SessionFilter{})
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, meta := range list {
		h.dirs[meta.ID] = clean(meta.WorkingDirectory)
		if st := markOf(meta.Metadata); st != pb.SessionStatus_SESSION_STATUS_UNSPECIFIED {
			h.terminal[meta.ID] = st
		}
		busy, _ := h.m.Busy(meta.ID)
		h.last[meta.ID] = h.deriveLocked(meta.ID, busy || meta.Status == session.StatusActive)
	}
	return nil
}

// run follows the manager's change feed until ctx ends or the manager
// closes, then ends every watcher.
func (h *hub) run(ctx context.Context) {
	defer h.close(session.ErrClosed)
	for {
		err := h.m.Watch(ctx, session.WatchOptions{}, func(u *pb.SessionUpdate) error {
			h.observe(ctx, u)
			return nil
		})
		var overflow *session.WatchOverflowError
		if errors.As(err, &overflow) && ctx.Err() == nil {
			continue // watch again from a fresh snapshot
		}
		return
	}
}

// observe re-derives the status of the session an update is about. The
// update only says that something changed: the status is read from the
// session itself, so a stale update cannot roll a status back.
func (h *hub) observe(ctx context.Context, u *pb.SessionUpdate) {
	id := u.GetSession().GetId()
	if id == "" {
		return
	}
	if u.GetDeleted() {
		h.mu.Lock()
		h.setLocked(id, pb.SessionStatus_SESSION_STATUS_STOPPED, "session deleted")
		delete(h.last, id)
		delete(h.dirs, id)
		delete(h.terminal, id)
		delete(h.markSeq, id)
		delete(h.transient, id)
		h.mu.Unlock()
		return
	}
	busy, loaded := h.m.Busy(id)
	if !loaded {
		busy = u.GetSession().GetStatus() == session.StatusActive
	}
	h.mu.Lock()
	h.dirs[id] = clean(u.GetSession().GetWorkingDirectory())
	// A turn that started after the mark (its THINKING status, which a
	// stopping provider never sends) reopens the session even when the
	// feed reports it late, after the turn is over.
	started := u.GetCause().GetStatusChange().GetStatus() == pb.AgentStatus_THINKING && u.GetCause().GetSequence() > h.markSeq[id]
	reopened := (busy || started) && h.terminal[id] != pb.SessionStatus_SESSION_STATUS_UNSPECIFIED && h.transient[id] == pb.SessionStatus_SESSION_STATUS_UNSPECIFIED
	if reopened {
		delete(h.terminal, id)
		delete(h.markSeq, id)
		if !busy {
			h.setLocked(id, pb.SessionStatus_SESSION_STATUS_WORKING, "")
		}
	}
	h.setLocked(id, h.deriveLocked(id, busy), "")
	h.mu.Unlock()
	if reopened {
		// Another client sent the stopped session a message.
		if s, err := h.m.Get(ctx, id); err == nil {
			_ = s.SetMetadata(ctx, map[string]string{metaStatus: "", metaEndedAt: "", metaError: ""})
		}
	}
}

// deriveLocked is the status of id now. h.mu is held.
func (h *hub) deriveLocked(id string, busy bool) pb.SessionStatus {
	if st := h.transient[id]; st != pb.SessionStatus_SESSION_STATUS_UNSPECIFIED {
		return st
	}
	if st := h.terminal[id]; st != pb.SessionStatus_SESSION_STATUS_UNSPECIFIED {
		return st
	}
	if busy {
		return pb.SessionStatus_SESSION_STATUS_WORKING
	}
	return pb.SessionStatus_SESSION_STATUS_RUNNING
}

// status is the current status of a session.
func (h *hub) status(id string) pb.SessionStatus {
	busy, _ := h.m.Busy(id)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deriveLocked(id, busy)
}

// hold puts id in a transient status (CREATED, STARTING, STOPPING). A
// known session's status is brought up to date first (the change feed may
// lag), so that no transition before the held one is lost.
func (h *hub) hold(id, dir string, st pb.SessionStatus, msg string) {
	busy, _ := h.m.Busy(id)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dirs[id] = clean(dir)
	if _, known := h.last[id]; known && h.transient[id] == pb.SessionStatus_SESSION_STATUS_UNSPECIFIED {
		h.setLocked(id, h.deriveLocked(id, busy), "")
	}
	h.transient[id] = st
	h.setLocked(id, st, msg)
}

// release ends a transient status; terminal, when set, marks the session
// STOPPED or FAILED as of its event seq (later turns reopen it).
func (h *hub) release(id string, terminal pb.SessionStatus, seq uint64, msg string) {
	busy, _ := h.m.Busy(id)
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.transient, id)
	if terminal != pb.SessionStatus_SESSION_STATUS_UNSPECIFIED {
		h.terminal[id] = terminal
		h.markSeq[id] = seq
	}
	h.setLocked(id, h.deriveLocked(id, busy), msg)
}

// setLocked records st and announces the change, if it is one. h.mu is
// held, which orders every session's events.
func (h *hub) setLocked(id string, st pb.SessionStatus, msg string) {
	prev := h.last[id]
	if prev == st {
		return
	}
	h.last[id] = st
	ev := &pb.SessionStatusEvent{SessionId: id, PreviousStatus: prev, NewStatus: st, Message: msg, Timestamp: timestamppb.New(h.now())}
	dir := h.dirs[id]
	for sub := range h.subs {
		if (sub.id != "" && sub.id != id) || (sub.dir != "" && sub.dir != dir) {
			continue
		}
		select {
		case <-sub.cut:
		case sub.ch <- ev:
		default:
			sub.stop(fmt.Errorf("%w: more than %d status events", errWatchOverflow, cap(sub.ch)))
		}
	}
}

// subscribe registers a watcher (of session id, or of every session in
// dir) and returns it with the current statuses it covers, read under the
// same lock so that nothing is missed between the two.
func (h *hub) subscribe(id, dir string) (*statusSub, []*pb.SessionStatusEvent, error) {
	sub := &statusSub{id: id, dir: clean(dir), ch: make(chan *pb.SessionStatusEvent, h.buffer), cut: make(chan struct{})}
	busy := map[string]bool{}
	if id != "" {
		busy[id], _ = h.m.Busy(id)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, session.ErrClosed
	}
	var now []*pb.SessionStatusEvent
	for sid, st := range h.last {
		if (id != "" && sid != id) || (sub.dir != "" && h.dirs[sid] != sub.dir) {
			continue
		}
		if id == "" && terminalStatus(st) {
			continue
		}
		now = append(now, &pb.SessionStatusEvent{SessionId: sid, NewStatus: st, Message: "current status", Timestamp: timestamppb.New(h.now())})
	}
	if id != "" && len(now) == 0 {
		st := h.deriveLocked(id, busy[id])
		h.last[id] = st
		now = append(now, &pb.SessionStatusEvent{SessionId: id, NewStatus: st, Message: "current status", Timestamp: timestamppb.New(h.now())})
	}
	h.subs[sub] = struct{}{}
	return sub, now, nil
}

func (h *hub) unsubscribe(sub *statusSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, sub)
}

func (h *hub) close(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for sub := range h.subs {
		sub.stop(err)
	}
}

func terminalStatus(st pb.SessionStatus) bool {
	return st == pb.SessionStatus_SESSION_STATUS_STOPPED || st == pb.SessionStatus_SESSION_STATUS_FAILED
}

func clean(dir string) string {
	if dir == "" {
		return ""
	}
	return filepath.Clean(dir)
}

// refresh re-derives the status of id (after the service changed it).
func (h *hub) refresh(id string) {
	busy, _ := h.m.Busy(id)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.setLocked(id, h.deriveLocked(id, busy), "")
}

// forget drops a session that was announced but never created.
func (h *hub) forget(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.last, id)
	delete(h.dirs, id)
	delete(h.terminal, id)
	delete(h.markSeq, id)
	delete(h.transient, id)
}
