package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

// Users, teams and memberships. Writes run in immediate transactions on
// the write connection (write); a method that narrows what someone may do
// appends its Change to identity_changes in that transaction (watch.go).

// writeTx is a write transaction that may publish changes.
type writeTx struct {
	*sql.Tx
	s         *Store
	published bool
}

// write runs fn in an immediate transaction on the write connection and
// commits it. The write lock serialises it with every other writer, of
// this process and others. If fn published a change, this process's
// watchers are woken once it is committed.
func (s *Store) write(ctx context.Context, fn func(tx *writeTx) error) error {
	sqlTx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	tx := &writeTx{Tx: sqlTx, s: s}
	if err := fn(tx); err != nil {
		return errors.Join(err, sqlTx.Rollback())
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if tx.published {
		s.changed.broadcast()
	}
	return nil
}

// affected returns errNone if res changed no row.
func affected(res sql.Result, errNone error) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return errNone
	}
	return nil
}

// exec runs a write statement in a transaction of its own and returns
// errNone if it changed no row.
func (s *Store) exec(ctx context.Context, errNone error, query string, args ...any) error {
	res, err := s.wdb.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	return affected(res, errNone)
}

// noRows maps sql.ErrNoRows to store.ErrNotFound.
func noRows(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

// collect reads every row of a query with scan. It closes rows.
func collect[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(...any) error }

// CreateUser implements store.Identity.
func (s *Store) CreateUser(ctx context.Context, u store.User) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := rules.User(&u, s.opt.Now()); err != nil {
		return fmt.Errorf("create user %q: %w", u.ID, err)
	}
	if err := s.exec(ctx, store.ErrExists, `INSERT INTO users (id, email, admin, disabled, created_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, u.ID, u.Email, u.Admin, u.Disabled, unixNano(u.CreatedAt)); err != nil {
		return fmt.Errorf("create user %q: %w", u.ID, err)
	}
	return nil
}

const userColumns = `id, email, admin, disabled, created_at`

func scanUser(row scanner) (store.User, error) {
	var (
		u       store.User
		created int64
	)
	err := row.Scan(&u.ID, &u.Email, &u.Admin, &u.Disabled, &created)
	u.CreatedAt = fromUnixNano(created)
	return u, err
}

// GetUser implements store.Identity.
func (s *Store) GetUser(ctx context.Context, id string) (store.User, error) {
	if err := s.live(); err != nil {
		return store.User{}, err
	}
	u, err := scanUser(s.rdb.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE id = ?`, id))
	if err != nil {
		return store.User{}, fmt.Errorf("get user %q: %w", id, noRows(err))
	}
	return u, nil
}

// ListUsers implements store.Identity.
func (s *Store) ListUsers(ctx context.Context) ([]store.User, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+userColumns+` FROM users ORDER BY id`)
	us, err := collect(rows, err, scanUser)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return us, nil
}

// SetUserDisabled implements store.Identity.
func (s *Store) SetUserDisabled(ctx context.Context, id string, disabled bool) error {
	if err := s.live(); err != nil {
		return err
	}
	err := s.write(ctx, func(tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE users SET disabled = ? WHERE id = ?`, disabled, id)
		if err != nil {
			return err
		}
		if err := affected(res, store.ErrNotFound); err != nil {
			return err
		}
		return tx.publish(ctx, store.ChangeUser, id)
	})
	if err != nil {
		return fmt.Errorf("set user %q disabled=%v: %w", id, disabled, err)
	}
	return nil
}

// CreateTeam implements store.Identity.
func (s *Store) CreateTeam(ctx context.Context, t store.Team) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := rules.Team(&t, s.opt.Now()); err != nil {
		return fmt.Errorf("create team %q: %w", t.ID, err)
	}
	if err := s.exec(ctx, store.ErrExists, `INSERT INTO teams (id, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING`,
		t.ID, unixNano(t.CreatedAt)); err != nil {
		return fmt.Errorf("create team %q: %w", t.ID, err)
	}
	return nil
}

func scanTeam(row scanner) (store.Team, error) {
	var (
		t       store.Team
		created int64
	)
	err := row.Scan(&t.ID, &created)
	t.CreatedAt = fromUnixNano(created)
	return t, err
}

// GetTeam implements store.Identity.
func (s *Store) GetTeam(ctx context.Context, id string) (store.Team, error) {
	if err := s.live(); err != nil {
		return store.Team{}, err
	}
	t, err := scanTeam(s.rdb.QueryRowContext(ctx, `SELECT id, created_at FROM teams WHERE id = ?`, id))
	if err != nil {
		return store.Team{}, fmt.Errorf("get team %q: %w", id, noRows(err))
	}
	return t, nil
}

// ListTeams implements store.Identity.
func (s *Store) ListTeams(ctx context.Context) ([]store.Team, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT id, created_at FROM teams ORDER BY id`)
	ts, err := collect(rows, err, scanTeam)
	if err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	return ts, nil
}

// SetMember implements store.Identity. A role change keeps AddedAt.
func (s *Store) SetMember(ctx context.Context, m store.Member) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := rules.Member(&m, s.opt.Now()); err != nil {
		return fmt.Errorf("set member %q of team %q: %w", m.UserID, m.TeamID, err)
	}
	err := s.write(ctx, func(tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO team_members (team_id, user_id, role, added_at)
			SELECT ?1, ?2, ?3, ?4
			WHERE EXISTS (SELECT 1 FROM teams WHERE id = ?1) AND EXISTS (SELECT 1 FROM users WHERE id = ?2)
			ON CONFLICT (team_id, user_id) DO UPDATE SET role = excluded.role`,
			m.TeamID, m.UserID, string(m.Role), unixNano(m.AddedAt))
		if err != nil {
			return err
		}
		if err := affected(res, fmt.Errorf("team or user: %w", store.ErrNotFound)); err != nil {
			return err
		}
		return tx.publish(ctx, store.ChangeMembership, m.UserID)
	})
	if err != nil {
		return fmt.Errorf("set member %q of team %q: %w", m.UserID, m.TeamID, err)
	}
	return nil
}

// RemoveMember implements store.Identity.
func (s *Store) RemoveMember(ctx context.Context, teamID, userID string) error {
	if err := s.live(); err != nil {
		return err
	}
	err := s.write(ctx, func(tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM team_members WHERE team_id = ? AND user_id = ?`, teamID, userID)
		if err != nil {
			return err
		}
		if err := affected(res, store.ErrNotFound); err != nil {
			return err
		}
		return tx.publish(ctx, store.ChangeMembership, userID)
	})
	if err != nil {
		return fmt.Errorf("remove member %q of team %q: %w", userID, teamID, err)
	}
	return nil
}

func scanMember(row scanner) (store.Member, error) {
	var (
		m     store.Member
		role  string
		added int64
	)
	err := row.Scan(&m.TeamID, &m.UserID, &role, &added)
	m.Role, m.AddedAt = store.Role(role), fromUnixNano(added)
	return m, err
}

// Members implements store.Identity.
func (s *Store) Members(ctx context.Context, teamID string) ([]store.Member, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT team_id, user_id, role, added_at FROM team_members
		WHERE team_id = ? ORDER BY user_id`, teamID)
	ms, err := collect(rows, err, scanMember)
	if err != nil {
		return nil, fmt.Errorf("members of team %q: %w", teamID, err)
	}
	return ms, nil
}

// Memberships implements store.Identity.
func (s *Store) Memberships(ctx context.Context, userID string) ([]store.Member, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT team_id, user_id, role, added_at FROM team_members
		WHERE user_id = ? ORDER BY team_id`, userID)
	ms, err := collect(rows, err, scanMember)
	if err != nil {
		return nil, fmt.Errorf("memberships of user %q: %w", userID, err)
	}
	return ms, nil
}
