package auth

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
)

// auditQueue bounds the events waiting to be written: past it, events are
// counted and summarised in one "audit.dropped" event, so that a flood of
// refused calls cannot grow memory or overload the store.
const auditQueue = 1024

// auditor writes audit events and token touches in the background.
type auditor struct {
	st  store.Store
	log *slog.Logger
	now func() time.Time

	// flushing is held for a whole flush, so that a flush returns only
	// once the events queued before it are written, including those that a
	// concurrent flush (the background writer) took off the queue first.
	flushing sync.Mutex

	mu      sync.Mutex
	events  []store.AuditEvent
	touches map[string]touch
	dropped int
	wake    chan struct{}
}

type touch struct {
	at   time.Time
	addr string
}

func newAuditor(st store.Store, log *slog.Logger, now func() time.Time) *auditor {
	return &auditor{st: st, log: log, now: now, touches: map[string]touch{}, wake: make(chan struct{}, 1)}
}

func (a *auditor) add(e store.AuditEvent) {
	if e.At.IsZero() {
		e.At = a.now()
	}
	a.mu.Lock()
	if len(a.events) >= auditQueue {
		a.dropped++
	} else {
		a.events = append(a.events, e)
	}
	a.mu.Unlock()
	a.signal()
}

func (a *auditor) touch(tokenID string, at time.Time, addr string) {
	a.mu.Lock()
	if len(a.touches) < auditQueue {
		a.touches[tokenID] = touch{at, addr}
	}
	a.mu.Unlock()
	a.signal()
}

func (a *auditor) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// run writes what is queued until ctx ends, then writes the rest.
func (a *auditor) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			a.flush(fctx)
			cancel()
			return
		case <-a.wake:
			a.flush(ctx)
		}
	}
}

func (a *auditor) flush(ctx context.Context) {
	a.flushing.Lock()
	defer a.flushing.Unlock()
	a.mu.Lock()
	events, touches, dropped := a.events, a.touches, a.dropped
	a.events, a.touches, a.dropped = nil, map[string]touch{}, 0
	a.mu.Unlock()
	if dropped > 0 {
		events = append(events, store.AuditEvent{At: a.now(), Action: "audit.dropped", Outcome: "error",
			Detail: "audit queue full: events not recorded: " + itoa(dropped)})
	}
	for _, e := range events {
		if err := a.st.AppendAudit(ctx, e); err != nil && ctx.Err() == nil {
			a.log.Warn("auth: write audit event", "action", e.Action, "err", err)
		}
	}
	for id, t := range touches {
		if err := a.st.TouchToken(ctx, id, t.at, t.addr); err != nil && ctx.Err() == nil {
			a.log.Debug("auth: record token use", "token_id", id, "err", err)
		}
	}
}

func itoa(n int) string {
	return strconv.Itoa(n)
}
