package sqlite

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

// Change notification. SQLite has no LISTEN/NOTIFY, and the relay is not
// the only process writing the file: `betcode-relay admin` revokes tokens
// and disables users on the same database while the relay runs. So a
// change is a row of identity_changes, appended in the transaction that
// makes the change, and every Watch polls the table every pollInterval for
// rows past its cursor. Writes are serialised and ids AUTOINCREMENT, so
// ids follow commit order and are never reused: the cursor never skips a
// row. A change committed by this Store also wakes its watchers at once.
//
// Rows older than changeRetention are pruned. A watcher that fell further
// behind than that finds a gap in the ids and reports ChangeAll.

// Timing of change notification.
const (
	// pollInterval is how often Watch reads identity_changes.
	pollInterval = 100 * time.Millisecond
	// changeRetention is how long a change row is kept.
	changeRetention = time.Hour
	// pruneInterval is how often a Store prunes, at most, when it
	// publishes.
	pruneInterval = 10 * time.Minute
	// pollPage caps the rows read per query.
	pollPage = 1000
)

// signal wakes every waiter at once: wait returns a channel that
// broadcast closes.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func newSignal() *signal { return &signal{ch: make(chan struct{})} }

// wait returns a channel closed by the next broadcast.
func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

func (s *signal) broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.ch)
	s.ch = make(chan struct{})
}

// publish appends a change in tx and, at most every pruneInterval, prunes
// the rows older than changeRetention.
func (tx *writeTx) publish(ctx context.Context, kind store.ChangeKind, id string) error {
	now := tx.s.opt.Now()
	if _, err := tx.ExecContext(ctx, `INSERT INTO identity_changes (kind, ref, at) VALUES (?, ?, ?)`,
		string(kind), id, unixNano(now)); err != nil {
		return fmt.Errorf("publish %s change: %w", kind, err)
	}
	tx.published = true
	last := tx.s.pruned.Load()
	if now.UnixNano()-last < int64(pruneInterval) || !tx.s.pruned.CompareAndSwap(last, now.UnixNano()) {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM identity_changes WHERE at < ?`,
		unixNano(now.Add(-changeRetention))); err != nil {
		return fmt.Errorf("prune identity changes: %w", err)
	}
	return nil
}

// Watch implements store.Identity. Close ends it (with store.ErrClosed).
func (s *Store) Watch(ctx context.Context, fn func(store.Change)) error {
	if err := s.live(); err != nil {
		return err
	}
	wctx, leave, ok := s.watchers.Join(ctx)
	if !ok {
		return store.ErrClosed
	}
	defer leave()
	w := watcher{s: s, fn: fn, last: -1}
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		wake := s.changed.wait() // before reading, so no commit is missed
		if err := w.poll(wctx); err != nil && wctx.Err() == nil {
			if !w.failing {
				s.opt.Logger.Warn("sqlite store: reading identity changes failed; retrying", "err", err)
			}
			w.failing = true
		} else {
			w.failing = false
		}
		select {
		case <-wctx.Done():
			if ctx.Err() == nil && s.watchers.Closed() {
				return store.ErrClosed
			}
			return ctx.Err()
		case <-tick.C:
		case <-wake:
		}
	}
}

// watcher is one Watch call's cursor.
type watcher struct {
	s       *Store
	fn      func(store.Change)
	last    int64 // id of the last change delivered; -1 before the first read
	failing bool  // the last poll failed (logged once)
}

// poll subscribes on its first success (the cursor, then ChangeAll), and
// later delivers the rows past the cursor.
func (w *watcher) poll(ctx context.Context) error {
	if w.last < 0 {
		// The sequence, not max(id): pruning may have emptied the table.
		var last int64
		if err := w.s.rdb.QueryRowContext(ctx, `SELECT coalesce(
				(SELECT seq FROM sqlite_sequence WHERE name = 'identity_changes'), 0)`).Scan(&last); err != nil {
			return fmt.Errorf("read change cursor: %w", err)
		}
		w.last = last
		w.fn(store.Change{Kind: store.ChangeAll})
		return nil
	}
	for {
		type row struct {
			id        int64
			kind, ref string
		}
		rows, err := w.s.rdb.QueryContext(ctx, `SELECT id, kind, ref FROM identity_changes
			WHERE id > ? ORDER BY id LIMIT ?`, w.last, pollPage)
		page, err := collect(rows, err, func(r scanner) (row, error) {
			var c row
			err := r.Scan(&c.id, &c.kind, &c.ref)
			return c, err
		})
		if err != nil {
			return fmt.Errorf("read identity changes: %w", err)
		}
		for _, c := range page {
			if c.id != w.last+1 {
				// Rows between were pruned before this watcher read them.
				w.fn(store.Change{Kind: store.ChangeAll})
			}
			w.last = c.id
			w.fn(rules.Change(c.kind, c.ref))
		}
		if len(page) < pollPage {
			return nil
		}
	}
}
