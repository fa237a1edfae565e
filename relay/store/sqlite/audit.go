package sqlite

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

// AppendAudit implements store.Identity.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEvent) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := rules.Audit(&e, s.opt.Now()); err != nil {
		return fmt.Errorf("append audit event %q: %w", e.Action, err)
	}
	if _, err := s.wdb.ExecContext(ctx, `INSERT INTO audit_events (at, actor, action, target, remote, outcome, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, unixNano(e.At), e.Actor, e.Action, e.Target, e.Remote, e.Outcome, e.Detail); err != nil {
		return fmt.Errorf("append audit event %q: %w", e.Action, err)
	}
	return nil
}

// ListAudit implements store.Identity: the newest f.Limit events that
// match, read newest first through an index and returned oldest first.
// The query is built from the filter's set fields, so that each shape
// uses its index (audit_events_at, _actor, _target).
func (s *Store) ListAudit(ctx context.Context, f store.AuditFilter) ([]store.AuditEvent, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	if err := rules.AuditFilter(&f); err != nil {
		return nil, fmt.Errorf("list audit events: %w", err)
	}
	var (
		where []string
		args  []any
	)
	if !f.Since.IsZero() {
		where = append(where, "at >= ?")
		args = append(args, unixNano(f.Since))
	}
	if f.Actor != "" {
		where = append(where, "(actor = ? OR target = ?)")
		args = append(args, f.Actor, f.Actor)
	}
	q := `SELECT id, at, actor, action, target, remote, outcome, detail FROM audit_events`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY at DESC, id DESC LIMIT ?"
	args = append(args, f.Limit)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	es, err := collect(rows, err, func(row scanner) (store.AuditEvent, error) {
		var (
			e  store.AuditEvent
			at int64
		)
		err := row.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Target, &e.Remote, &e.Outcome, &e.Detail)
		e.At = fromUnixNano(at)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list audit events: %w", err)
	}
	slices.Reverse(es)
	return es, nil
}
