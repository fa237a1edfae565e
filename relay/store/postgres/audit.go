package postgres

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

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
	if _, err := s.pool.Exec(ctx, `INSERT INTO audit_events (at, actor, action, target, remote, outcome, detail)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, e.At, e.Actor, e.Action, e.Target, e.Remote, e.Outcome, e.Detail); err != nil {
		return fmt.Errorf("append audit event %q: %w", e.Action, err)
	}
	return nil
}

// ListAudit implements store.Identity: the newest f.Limit events that
// match, read newest first through an index and returned oldest first.
// The query is built from the filter's set fields, so each shape gets a
// plan that uses its index (audit_events_at, _actor, _target).
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
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if !f.Since.IsZero() {
		where = append(where, "at >= "+arg(f.Since))
	}
	if f.Actor != "" {
		p := arg(f.Actor)
		where = append(where, "(actor = "+p+" OR target = "+p+")")
	}
	q := `SELECT id, at, actor, action, target, remote, outcome, detail FROM audit_events`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY at DESC, id DESC LIMIT " + arg(f.Limit)
	rows, _ := s.pool.Query(ctx, q, args...)
	es, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.AuditEvent, error) {
		var e store.AuditEvent
		err := row.Scan(&e.ID, &e.At, &e.Actor, &e.Action, &e.Target, &e.Remote, &e.Outcome, &e.Detail)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list audit events: %w", err)
	}
	slices.Reverse(es)
	return es, nil
}
