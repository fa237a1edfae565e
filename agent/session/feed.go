package session

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/betcode-dev/betcode/agent/bridge"
	"github.com/betcode-dev/betcode/agent/eventlog"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// feed is the change feed behind WatchSessions: sessions publish a
// SessionUpdate for every change a session list shows, and every watcher
// gets a copy.
//
// Publishing never blocks (it runs under a session's mu, often on the event
// log's writer goroutine). Each watcher has a bounded buffer
// (Config.WatchBuffer); a watcher whose buffer is full is cut off, not
// resynchronised: its Watch returns a *WatchOverflowError (RESOURCE_EXHAUSTED
// / SLOW_CONSUMER at the API) and the client watches again, which starts with
// a fresh snapshot. Updates carry whole session states, so a client that
// missed some needs nothing but the next snapshot.
type feed struct {
	mu       sync.Mutex
	watchers map[*watcher]struct{}
	closed   bool
	n        atomic.Int32 // len(watchers), read without mu by active
}

// watcher is one WatchSessions stream's buffer.
type watcher struct {
	dir     string // cleaned working directory filter; "" = all
	ch      chan *pb.SessionUpdate
	cutOnce sync.Once
	cut     chan struct{}
	cutErr  error
}

func (w *watcher) stop(err error) {
	w.cutOnce.Do(func() {
		w.cutErr = err
		close(w.cut)
	})
}

// WatchOverflowError ends a WatchSessions stream that fell more than Buffer
// updates behind. It wraps ErrSlowConsumer.
type WatchOverflowError struct{ Buffer int }

func (e *WatchOverflowError) Error() string {
	return fmt.Sprintf("client fell more than %d session updates behind and was disconnected; call WatchSessions again for a fresh snapshot", e.Buffer)
}

func (e *WatchOverflowError) Unwrap() error { return ErrSlowConsumer }

// active reports whether anyone watches, so that sessions skip building
// updates nobody reads.
func (f *feed) active() bool { return f.n.Load() > 0 }

func (f *feed) add(dir string, buffer int) (*watcher, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrClosed
	}
	if f.watchers == nil {
		f.watchers = map[*watcher]struct{}{}
	}
	w := &watcher{dir: dir, ch: make(chan *pb.SessionUpdate, buffer), cut: make(chan struct{})}
	f.watchers[w] = struct{}{}
	f.n.Store(int32(len(f.watchers)))
	return w, nil
}

func (f *feed) remove(w *watcher) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.watchers, w)
	f.n.Store(int32(len(f.watchers)))
}

// publish offers upd (a change of a session in dir) to every watcher whose
// filter matches. The update is shared: nobody may modify it.
func (f *feed) publish(dir string, upd *pb.SessionUpdate) {
	if !f.active() {
		return
	}
	dir = cleanDir(dir)
	f.mu.Lock()
	defer f.mu.Unlock()
	for w := range f.watchers {
		if w.dir != "" && w.dir != dir {
			continue
		}
		select {
		case <-w.cut:
			continue
		default:
		}
		select {
		case w.ch <- upd:
		default:
			w.stop(&WatchOverflowError{Buffer: cap(w.ch)})
		}
	}
}

// close ends every watcher with err and refuses new ones.
func (f *feed) close(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for w := range f.watchers {
		w.stop(err)
	}
}

func cleanDir(dir string) string {
	if dir == "" {
		return ""
	}
	return filepath.Clean(dir)
}

// WatchOptions control Watch.
type WatchOptions struct {
	// WorkingDirectory, when set, limits the updates to sessions in it.
	WorkingDirectory string
	// OnCut, if set, is called (from another goroutine) as soon as the
	// watcher is cut off, with the reason (a *WatchOverflowError, or
	// ErrClosed at shutdown), so that the caller can abort a send blocked
	// on a stalled client. Watch returns the same reason once send returns.
	OnCut func(reason error)
}

// Watch sends one SessionUpdate per stored session (with its open prompts),
// then one with SnapshotDone, then one per change until ctx ends (ctx.Err),
// the agent shuts down (ErrClosed) or the client falls behind
// (*WatchOverflowError, see feed). Updates are shared: send must not modify
// them.
//
// Changes are buffered from before the snapshot is read, so none is lost; a
// change may therefore repeat a state the snapshot already showed.
func (m *Manager) Watch(ctx context.Context, opt WatchOptions, send func(*pb.SessionUpdate) error) error {
	dir := cleanDir(opt.WorkingDirectory)
	w, err := m.feed.add(dir, m.cfg.WatchBuffer)
	if err != nil {
		return err
	}
	defer m.feed.remove(w)
	if opt.OnCut != nil {
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-w.cut:
				opt.OnCut(w.cutErr)
			case <-done:
			}
		}()
	}
	list, _, err := m.log.ListSessions(ctx, eventlog.SessionFilter{})
	if err != nil {
		return fmt.Errorf("list sessions: %w", err)
	}
	for _, meta := range list {
		if dir != "" && cleanDir(meta.WorkingDirectory) != dir {
			continue
		}
		upd := &pb.SessionUpdate{Session: Summary(meta)}
		if s := m.loaded(meta.ID); s != nil {
			if s.deleted.Load() {
				continue
			}
			s.mu.Lock()
			upd.Session, upd.Pending = s.summaryLocked(), s.pendingLocked()
			s.mu.Unlock()
		}
		if err := m.watchSend(ctx, w, send, upd); err != nil {
			return err
		}
	}
	if err := m.watchSend(ctx, w, send, &pb.SessionUpdate{SnapshotDone: true}); err != nil {
		return err
	}
	for {
		select {
		case upd := <-w.ch:
			if err := send(upd); err != nil {
				return err
			}
		case <-w.cut:
			return w.cutErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// watchSend sends one snapshot update unless the watcher was cut off or ctx
// ended.
func (m *Manager) watchSend(ctx context.Context, w *watcher, send func(*pb.SessionUpdate) error, upd *pb.SessionUpdate) error {
	select {
	case <-w.cut:
		return w.cutErr
	case <-ctx.Done():
		return ctx.Err()
	default:
	}
	return send(upd)
}

// feedKind reports whether an event of this kind changes what a session
// list shows.
func feedKind(ev *pb.AgentEvent) bool {
	switch ev.Event.(type) {
	case *pb.AgentEvent_SessionInfo, *pb.AgentEvent_StatusChange, *pb.AgentEvent_Usage,
		*pb.AgentEvent_PermissionRequest, *pb.AgentEvent_UserQuestion,
		*pb.AgentEvent_TurnComplete, *pb.AgentEvent_Error,
		*pb.AgentEvent_UserInput: // the preview and message count change
		return true
	}
	return false
}

// publishLocked announces the session's current state to watchers, with
// the event that changed it (nil for renames and resolved prompts). s.mu is
// held, which orders a session's updates as its changes.
func (s *Session) publishLocked(cause *pb.AgentEvent) {
	if !s.m.feed.active() || s.deleted.Load() {
		return
	}
	s.m.feed.publish(s.meta.WorkingDirectory, &pb.SessionUpdate{Session: s.summaryLocked(), Pending: s.pendingLocked(), Cause: cause})
}

// observeLocked keeps the session's live state (agent status, announced
// prompts) in step with a published event, and announces the change to
// watchers. s.mu is held.
func (s *Session) observeLocked(ev *pb.AgentEvent) {
	switch e := ev.Event.(type) {
	case *pb.AgentEvent_StatusChange:
		s.status = e.StatusChange.GetStatus()
	case *pb.AgentEvent_PermissionRequest:
		if p := s.perms[e.PermissionRequest.GetRequestId()]; p != nil {
			p.events = append(p.events, ev)
		}
	case *pb.AgentEvent_UserQuestion:
		if p := s.perms[e.UserQuestion.GetQuestionId()]; p != nil {
			p.events = append(p.events, ev)
		}
	case *pb.AgentEvent_SubagentTask:
		s.trackSubagentLocked(e.SubagentTask)
	}
	if ev.Sequence > s.feedFrom && feedKind(ev) {
		s.publishLocked(ev)
	}
}

// trackSubagentLocked keeps s.bgSubagents: a subagent running in the
// background from its first update that says so until its end.
func (s *Session) trackSubagentLocked(u *pb.SubagentTaskUpdate) {
	switch {
	case bridge.SubagentTaskEnded(u.GetStatus()):
		delete(s.bgSubagents, u.GetToolUseId())
	case u.GetIsBackgrounded() && u.GetToolUseId() != "":
		if s.bgSubagents == nil {
			s.bgSubagents = map[string]struct{}{}
		}
		s.bgSubagents[u.GetToolUseId()] = struct{}{}
	}
}
