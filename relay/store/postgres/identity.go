package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

// Users, teams and memberships. A method that narrows what someone may do
// publishes its Change in its own transaction (watch.go), so the change
// and its notification commit together.

// timeArg encodes t for a nullable timestamptz column: NULL for the zero
// time. Scanning NULL into a pgtype.Timestamptz gives the zero time back.
func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// notFound maps pgx.ErrNoRows to store.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

// CreateUser implements store.Identity.
func (s *Store) CreateUser(ctx context.Context, u store.User) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := rules.User(&u, s.opt.Now()); err != nil {
		return fmt.Errorf("create user %q: %w", u.ID, err)
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO users (id, email, admin, disabled, created_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, u.ID, u.Email, u.Admin, u.Disabled, u.CreatedAt)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrExists
	}
	if err != nil {
		return fmt.Errorf("create user %q: %w", u.ID, err)
	}
	return nil
}

const userColumns = `id, email, admin, disabled, created_at`

func scanUser(row pgx.CollectableRow) (store.User, error) {
	var u store.User
	err := row.Scan(&u.ID, &u.Email, &u.Admin, &u.Disabled, &u.CreatedAt)
	return u, err
}

// GetUser implements store.Identity.
func (s *Store) GetUser(ctx context.Context, id string) (store.User, error) {
	if err := s.live(); err != nil {
		return store.User{}, err
	}
	rows, _ := s.pool.Query(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id)
	u, err := pgx.CollectExactlyOneRow(rows, scanUser)
	if err != nil {
		return store.User{}, fmt.Errorf("get user %q: %w", id, notFound(err))
	}
	return u, nil
}

// ListUsers implements store.Identity.
func (s *Store) ListUsers(ctx context.Context) ([]store.User, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	rows, _ := s.pool.Query(ctx, `SELECT `+userColumns+` FROM users ORDER BY id`)
	us, err := pgx.CollectRows(rows, scanUser)
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
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE users SET disabled = $2 WHERE id = $1`, id, disabled)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.ErrNotFound
		}
		return publish(ctx, tx, store.ChangeUser, id)
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
	tag, err := s.pool.Exec(ctx, `INSERT INTO teams (id, created_at) VALUES ($1, $2) ON CONFLICT DO NOTHING`, t.ID, t.CreatedAt)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrExists
	}
	if err != nil {
		return fmt.Errorf("create team %q: %w", t.ID, err)
	}
	return nil
}

func scanTeam(row pgx.CollectableRow) (store.Team, error) {
	var t store.Team
	err := row.Scan(&t.ID, &t.CreatedAt)
	return t, err
}

// GetTeam implements store.Identity.
func (s *Store) GetTeam(ctx context.Context, id string) (store.Team, error) {
	if err := s.live(); err != nil {
		return store.Team{}, err
	}
	rows, _ := s.pool.Query(ctx, `SELECT id, created_at FROM teams WHERE id = $1`, id)
	t, err := pgx.CollectExactlyOneRow(rows, scanTeam)
	if err != nil {
		return store.Team{}, fmt.Errorf("get team %q: %w", id, notFound(err))
	}
	return t, nil
}

// ListTeams implements store.Identity.
func (s *Store) ListTeams(ctx context.Context) ([]store.Team, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	rows, _ := s.pool.Query(ctx, `SELECT id, created_at FROM teams ORDER BY id`)
	ts, err := pgx.CollectRows(rows, scanTeam)
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
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// One statement: insert only when both the team and the user
		// exist. Nothing deletes either, so no lock is needed to keep them.
		tag, err := tx.Exec(ctx, `INSERT INTO team_members (team_id, user_id, role, added_at)
			SELECT $1, $2, $3, $4
			WHERE EXISTS (SELECT 1 FROM teams WHERE id = $1) AND EXISTS (SELECT 1 FROM users WHERE id = $2)
			ON CONFLICT (team_id, user_id) DO UPDATE SET role = EXCLUDED.role`,
			m.TeamID, m.UserID, string(m.Role), m.AddedAt)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("team or user: %w", store.ErrNotFound)
		}
		return publish(ctx, tx, store.ChangeMembership, m.UserID)
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
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM team_members WHERE team_id = $1 AND user_id = $2`, teamID, userID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.ErrNotFound
		}
		return publish(ctx, tx, store.ChangeMembership, userID)
	})
	if err != nil {
		return fmt.Errorf("remove member %q of team %q: %w", userID, teamID, err)
	}
	return nil
}

func scanMember(row pgx.CollectableRow) (store.Member, error) {
	var (
		m    store.Member
		role string
	)
	err := row.Scan(&m.TeamID, &m.UserID, &role, &m.AddedAt)
	m.Role = store.Role(role)
	return m, err
}

// Members implements store.Identity.
func (s *Store) Members(ctx context.Context, teamID string) ([]store.Member, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	rows, _ := s.pool.Query(ctx, `SELECT team_id, user_id, role, added_at FROM team_members
		WHERE team_id = $1 ORDER BY user_id`, teamID)
	ms, err := pgx.CollectRows(rows, scanMember)
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
	rows, _ := s.pool.Query(ctx, `SELECT team_id, user_id, role, added_at FROM team_members
		WHERE user_id = $1 ORDER BY team_id`, userID)
	ms, err := pgx.CollectRows(rows, scanMember)
	if err != nil {
		return nil, fmt.Errorf("memberships of user %q: %w", userID, err)
	}
	return ms, nil
}
