package eventlog

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// writer is the single goroutine that commits queued events. It exits once
// Close has closed the queue and everything queued before that is handled;
// Close waits for it on writerDone.
func (l *Log) writer() {
	defer close(l.writerDone)
	var (
		events  = make([]Event, 0, l.opt.MaxBatch)
		flushes []chan error
	)
	for {
		it, ok := <-l.queue
		if !ok {
			return
		}
		events, flushes = events[:0], flushes[:0]
		open := l.collect(it, &events, &flushes)

		err := l.failure()
		if err == nil && len(events) > 0 {
			start := time.Now()
			err = l.commit(events)
			if m := l.opt.Metrics; m != nil {
				m.Commits.Observe(time.Since(start).Seconds())
				if err == nil {
					m.Persisted.Add(float64(len(events)))
				} else {
					m.Failed.Inc()
				}
			}
			if err != nil {
				err = fmt.Errorf("%w: %w", ErrWrite, err)
				l.log.Error("eventlog: commit failed; log is now read-only",
					"events", len(events), "first_session", events[0].SessionID,
					"first_seq", events[0].Seq, "err", err)
				l.errMu.Lock()
				l.writeErr = err
				l.errMu.Unlock()
			} else if l.opt.OnCommit != nil {
				l.opt.OnCommit(events)
			}
		}
		for _, f := range flushes {
			f <- err // buffered
		}
		clear(events) // drop payload references until the next batch
		if !open {
			return
		}
	}
}

// collect adds first and then whatever else is already queued to the batch,
// stopping at MaxBatch events, at MaxDelay after it started, or when the
// queue is empty. It reports false if it saw the queue closed.
func (l *Log) collect(first item, events *[]Event, flushes *[]chan error) bool {
	add := func(it item) {
		if it.flushed != nil {
			*flushes = append(*flushes, it.flushed)
		} else {
			*events = append(*events, it.ev)
		}
	}
	add(first)
	deadline := time.Now().Add(l.opt.MaxDelay)
	for n := 0; len(*events) < l.opt.MaxBatch; n++ {
		// Reading the clock on every receive would cost more than the
		// receive; check it every 64 items.
		if n&63 == 63 && time.Now().After(deadline) {
			return true
		}
		select {
		case it, ok := <-l.queue:
			if !ok {
				return false
			}
			add(it)
		default:
			return true
		}
	}
	return true
}

// commit inserts events, and the key/value entries and session statuses
// they carry, in one transaction.
func (l *Log) commit(events []Event) (err error) {
	// Not cancellable: once taken from the queue, events are committed or
	// the log fails; busy_timeout bounds the wait for the lock.
	ctx := context.Background()
	tx, err := l.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	stmt := tx.StmtContext(ctx, l.insertStmt)
	for i := range events {
		ev := &events[i]
		if _, err := stmt.ExecContext(ctx, ev.SessionID, int64(ev.Seq), unixNano(ev.Time), ev.Kind, ev.Payload); err != nil {
			return fmt.Errorf("insert %s/%d: %w", ev.SessionID, ev.Seq, err)
		}
		if ev.With != nil {
			if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO kv (session_id, key, value) VALUES (?, ?, ?)`,
				ev.SessionID, ev.With.Key, ev.With.Value); err != nil {
				return fmt.Errorf("put kv %s/%q with event %d: %w", ev.SessionID, ev.With.Key, ev.Seq, err)
			}
		}
		if ev.Status != "" {
			if _, err := tx.ExecContext(ctx, `UPDATE sessions SET status = ? WHERE id = ?`, ev.Status, ev.SessionID); err != nil {
				return fmt.Errorf("set status of %s with event %d: %w", ev.SessionID, ev.Seq, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// unixNano encodes t for the ts column; the zero time is 0.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromUnixNano decodes the ts column.
func fromUnixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
