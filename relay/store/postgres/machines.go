package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

const machineColumns = `id, owner_id, team_id, name, hostname, capabilities, os, arch, version,
	cpu_cores, memory_bytes, disk_free_bytes, registered_at, last_seen`

// selectColumns are machineColumns plus the replica, which only
// SetMachineReplica and ClearMachineReplica write, and the revocation time,
// which only RevokeMachine writes.
const selectColumns = machineColumns + `, replica, revoked_at`

// UpsertMachine implements store.Store.
func (s *Store) UpsertMachine(ctx context.Context, m store.Machine) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := rules.Machine(&m, s.opt.Now()); err != nil {
		return fmt.Errorf("upsert machine %q: %w", m.ID, err)
	}
	// Under the machine's lock, so that a concurrent RevokeMachine either
	// sees the row this inserts or is seen here (revoke.go).
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockMachine(ctx, tx, m.ID); err != nil {
			return err
		}
		var revoked bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM revoked_machines WHERE machine_id = $1)`, m.ID).Scan(&revoked); err != nil {
			return fmt.Errorf("check revocation: %w", err)
		}
		if revoked {
			return store.ErrRevoked
		}
		// The WHERE makes the update a no-op for another owner's machine,
		// which then affects no row.
		tag, err := tx.Exec(ctx, `INSERT INTO machines (`+machineColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
			ON CONFLICT (id) DO UPDATE SET
				name = EXCLUDED.name, hostname = EXCLUDED.hostname,
				capabilities = EXCLUDED.capabilities, os = EXCLUDED.os,
				arch = EXCLUDED.arch, version = EXCLUDED.version,
				cpu_cores = EXCLUDED.cpu_cores, memory_bytes = EXCLUDED.memory_bytes,
				disk_free_bytes = EXCLUDED.disk_free_bytes, last_seen = EXCLUDED.last_seen
			WHERE machines.owner_id = EXCLUDED.owner_id AND machines.team_id = EXCLUDED.team_id`,
			m.ID, m.OwnerID, m.TeamID, m.Name, m.Hostname, m.Capabilities, m.OS, m.Arch, m.Version,
			int64(m.CPUCores), int64(m.MemoryBytes), int64(m.DiskFreeBytes), m.RegisteredAt, m.LastSeen)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.ErrConflict
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("upsert machine %q for owner %q team %q: %w", m.ID, m.OwnerID, m.TeamID, err)
	}
	return nil
}

// TouchMachine implements store.Store.
func (s *Store) TouchMachine(ctx context.Context, id string, seen time.Time) error {
	if err := s.live(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE machines SET last_seen = $2 WHERE id = $1`, id, seen)
	if err != nil {
		return fmt.Errorf("touch machine %q: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("touch machine %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// SetMachineReplica implements store.Store.
func (s *Store) SetMachineReplica(ctx context.Context, id, replica string, seen time.Time) error {
	if err := s.live(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE machines SET replica = $2, last_seen = $3 WHERE id = $1`, id, replica, seen)
	if err != nil {
		return fmt.Errorf("set replica of machine %q: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set replica of machine %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// ClearMachineReplica implements store.Store.
func (s *Store) ClearMachineReplica(ctx context.Context, id, replica string) error {
	if err := s.live(); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `UPDATE machines SET replica = '' WHERE id = $1 AND replica = $2`, id, replica); err != nil {
		return fmt.Errorf("clear replica of machine %q: %w", id, err)
	}
	return nil
}

// GetMachine implements store.Store.
func (s *Store) GetMachine(ctx context.Context, id string) (store.Machine, error) {
	if err := s.live(); err != nil {
		return store.Machine{}, err
	}
	rows, _ := s.pool.Query(ctx, `SELECT `+selectColumns+` FROM machines WHERE id = $1`, id)
	m, err := pgx.CollectExactlyOneRow(rows, scanMachine)
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Machine{}, fmt.Errorf("get machine %q: %w", id, err)
	}
	return m, nil
}

// ListMachines implements store.Store: the user's own machines and those
// of its teams, each through its index (machines_owner, machines_team).
func (s *Store) ListMachines(ctx context.Context, userID string) ([]store.Machine, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	rows, _ := s.pool.Query(ctx, `SELECT `+selectColumns+` FROM machines
			WHERE owner_id = $1 AND team_id = '' AND revoked_at IS NULL
		UNION ALL
		SELECT `+selectColumns+` FROM machines
			WHERE team_id <> '' AND team_id IN (SELECT team_id FROM team_members WHERE user_id = $1)
				AND revoked_at IS NULL
		ORDER BY id`, userID)
	ms, err := pgx.CollectRows(rows, scanMachine)
	if err != nil {
		return nil, fmt.Errorf("list machines of user %q: %w", userID, err)
	}
	return ms, nil
}

func scanMachine(row pgx.CollectableRow) (store.Machine, error) {
	var (
		m                store.Machine
		cores, mem, disk int64
		revoked          pgtype.Timestamptz
	)
	err := row.Scan(&m.ID, &m.OwnerID, &m.TeamID, &m.Name, &m.Hostname, &m.Capabilities, &m.OS, &m.Arch, &m.Version,
		&cores, &mem, &disk, &m.RegisteredAt, &m.LastSeen, &m.Replica, &revoked)
	m.CPUCores, m.MemoryBytes, m.DiskFreeBytes = uint32(cores), uint64(mem), uint64(disk)
	m.RevokedAt = revoked.Time
	return m, err
}

// SetCurrentMachine implements store.Store.
func (s *Store) SetCurrentMachine(ctx context.Context, ownerID, machineID string) (string, error) {
	if err := s.live(); err != nil {
		return "", err
	}
	var prev string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if machineID != "" {
			// FOR SHARE: the machine cannot be deleted before we commit.
			var one int
			err := tx.QueryRow(ctx, `SELECT 1 FROM machines WHERE id = $1 FOR SHARE`, machineID).Scan(&one)
			if errors.Is(err, pgx.ErrNoRows) {
				return store.ErrNotFound
			} else if err != nil {
				return err
			}
		}
		// Insert-then-lock so two first calls of one owner serialise on
		// the row and the second sees the first's machine as previous.
		if _, err := tx.Exec(ctx, `INSERT INTO current_machines (owner_id, machine_id, updated_at)
			VALUES ($1, '', $2) ON CONFLICT DO NOTHING`, ownerID, s.opt.Now()); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT machine_id FROM current_machines WHERE owner_id = $1 FOR UPDATE`, ownerID).Scan(&prev); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE current_machines SET machine_id = $2, updated_at = $3 WHERE owner_id = $1`,
			ownerID, machineID, s.opt.Now())
		return err
	})
	if err != nil {
		return "", fmt.Errorf("set current machine of owner %q to %q: %w", ownerID, machineID, err)
	}
	return prev, nil
}

// CurrentMachine implements store.Store.
func (s *Store) CurrentMachine(ctx context.Context, ownerID string) (string, error) {
	if err := s.live(); err != nil {
		return "", err
	}
	var id string
	err := s.pool.QueryRow(ctx, `SELECT machine_id FROM current_machines WHERE owner_id = $1`, ownerID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("current machine of owner %q: %w", ownerID, err)
	}
	return id, nil
}
