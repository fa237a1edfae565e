package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

// Change notification is LISTEN/NOTIFY. A method that publishes a Change
// calls pg_notify in its own transaction: PostgreSQL delivers the
// notification to every listening session, of every replica, when (and
// only if) the transaction commits, in commit order. A listener that loses
// its connection may miss notifications, so after it listens again it
// reports ChangeAll.
//
// The channel is database-wide, not per schema: stores on different
// schemas of one database see each other's changes. That costs spurious
// cache drops, never a missed change.

// changeChannel is the NOTIFY channel of identity changes. The payload is
// "<kind>:<id>".
const changeChannel = "betcode_identity"

// notifySQL publishes one payload; it takes effect at commit.
const notifySQL = `SELECT pg_notify('` + changeChannel + `', $1)`

// maxPayload keeps payloads under NOTIFY's 8000-byte limit; a change with
// a longer id is published as ChangeAll rather than failing the change.
const maxPayload = 7900

// payload encodes a change for notifySQL.
func payload(kind store.ChangeKind, id string) string {
	p := string(kind) + ":" + id
	if len(p) > maxPayload {
		return string(store.ChangeAll) + ":"
	}
	return p
}

// publish sends a change in tx.
func publish(ctx context.Context, tx pgx.Tx, kind store.ChangeKind, id string) error {
	if _, err := tx.Exec(ctx, notifySQL, payload(kind, id)); err != nil {
		return fmt.Errorf("publish %s change: %w", kind, err)
	}
	return nil
}

// parsePayload decodes a notification payload; anything unexpected is
// ChangeAll.
func parsePayload(p string) store.Change {
	kind, id, _ := strings.Cut(p, ":")
	return rules.Change(kind, id)
}

// Reconnection backoff of Watch.
const (
	watchRetryMin = 100 * time.Millisecond
	watchRetryMax = 5 * time.Second
)

// Watch implements store.Identity. It listens on a connection of its own,
// taken from the pool and hijacked, so that it neither holds a pool slot
// nor keeps Close waiting. Close ends it (with store.ErrClosed).
func (s *Store) Watch(ctx context.Context, fn func(store.Change)) error {
	if err := s.live(); err != nil {
		return err
	}
	wctx, leave, ok := s.watchers.Join(ctx)
	if !ok {
		return store.ErrClosed
	}
	defer leave()
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(watchRetryMin),
		backoff.WithMaxInterval(watchRetryMax),
		backoff.WithMaxElapsedTime(0), // never give up
	)
	for {
		err := s.listen(wctx, fn, b.Reset)
		if wctx.Err() != nil {
			break
		}
		wait := b.NextBackOff()
		s.opt.Logger.Warn("postgres store: identity change listener lost its connection; listening again",
			"err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-wctx.Done():
			t.Stop()
		case <-t.C:
		}
		if wctx.Err() != nil {
			break
		}
	}
	if ctx.Err() == nil && s.watchers.Closed() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// listen runs one connection's subscription: LISTEN, then fn(ChangeAll)
// and listening (so the backoff restarts), then every notification until
// the connection fails or ctx ends.
func (s *Store) listen(ctx context.Context, fn func(store.Change), listening func()) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection: %w", err)
	}
	conn := pc.Hijack()
	defer func() {
		// ctx may have ended: give the goodbye a moment of its own.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+changeChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	listening()
	fn(store.Change{Kind: store.ChangeAll})
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		fn(parsePayload(n.Payload))
	}
}
