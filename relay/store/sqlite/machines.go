package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
	capsJSON, _ := json.Marshal(m.Capabilities) // a []string always marshals
	err := s.write(ctx, func(tx *writeTx) error {
		var revoked bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM revoked_machines WHERE machine_id = ?)`, m.ID).Scan(&revoked); err != nil {
			return fmt.Errorf("check revocation: %w", err)
		}
		if revoked {
			return store.ErrRevoked
		}
		// The WHERE makes the update a no-op for another owner's machine,
		// which then changes no row.
		res, err := tx.ExecContext(ctx, `INSERT INTO machines (`+machineColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET
				name = excluded.name, hostname = excluded.hostname,
				capabilities = excluded.capabilities, os = excluded.os,
				arch = excluded.arch, version = excluded.version,
				cpu_cores = excluded.cpu_cores, memory_bytes = excluded.memory_bytes,
				disk_free_bytes = excluded.disk_free_bytes, last_seen = excluded.last_seen
			WHERE machines.owner_id = excluded.owner_id AND machines.team_id = excluded.team_id`,
			m.ID, m.OwnerID, m.TeamID, m.Name, m.Hostname, string(capsJSON), m.OS, m.Arch, m.Version,
			int64(m.CPUCores), int64(m.MemoryBytes), int64(m.DiskFreeBytes), unixNano(m.RegisteredAt), unixNano(m.LastSeen))
		if err != nil {
			return err
		}
		return affected(res, store.ErrConflict)
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
	res, err := s.wdb.ExecContext(ctx, `UPDATE machines SET last_seen = ? WHERE id = ?`, unixNano(seen), id)
	if err != nil {
		return fmt.Errorf("touch machine %q: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("touch machine %q: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("touch machine %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// SetMachineReplica implements store.Store.
func (s *Store) SetMachineReplica(ctx context.Context, id, replica string, seen time.Time) error {
	if err := s.live(); err != nil {
		return err
	}
	res, err := s.wdb.ExecContext(ctx, `UPDATE machines SET replica = ?, last_seen = ? WHERE id = ?`, replica, unixNano(seen), id)
	if err != nil {
		return fmt.Errorf("set replica of machine %q: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("set replica of machine %q: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("set replica of machine %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// ClearMachineReplica implements store.Store.
func (s *Store) ClearMachineReplica(ctx context.Context, id, replica string) error {
	if err := s.live(); err != nil {
		return err
	}
	if _, err := s.wdb.ExecContext(ctx, `UPDATE machines SET replica = '' WHERE id = ? AND replica = ?`, id, replica); err != nil {
		return fmt.Errorf("clear replica of machine %q: %w", id, err)
	}
	return nil
}

// GetMachine implements store.Store.
func (s *Store) GetMachine(ctx context.Context, id string) (store.Machine, error) {
	if err := s.live(); err != nil {
		return store.Machine{}, err
	}
	m, err := scanMachine(s.rdb.QueryRowContext(ctx, `SELECT `+selectColumns+` FROM machines WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
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
	ms, err := s.queryMachines(ctx, `SELECT `+selectColumns+` FROM machines
			WHERE owner_id = ?1 AND team_id = '' AND revoked_at = 0
		UNION ALL
		SELECT `+selectColumns+` FROM machines
			WHERE team_id <> '' AND team_id IN (SELECT team_id FROM team_members WHERE user_id = ?1)
				AND revoked_at = 0
		ORDER BY id`, userID)
	if err != nil {
		return nil, fmt.Errorf("list machines of user %q: %w", userID, err)
	}
	return ms, nil
}

// queryMachines runs a query of selectColumns.
func (s *Store) queryMachines(ctx context.Context, query string, args ...any) ([]store.Machine, error) {
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	return collect(rows, err, scanMachine)
}

func scanMachine(row scanner) (store.Machine, error) {
	var (
		m                store.Machine
		caps             string
		cores, mem, disk int64
		reg, seen, rev   int64
	)
	if err := row.Scan(&m.ID, &m.OwnerID, &m.TeamID, &m.Name, &m.Hostname, &caps, &m.OS, &m.Arch, &m.Version,
		&cores, &mem, &disk, &reg, &seen, &m.Replica, &rev); err != nil {
		return m, err
	}
	if err := json.Unmarshal([]byte(caps), &m.Capabilities); err != nil {
		return m, fmt.Errorf("machine %q capabilities: %w", m.ID, err)
	}
	m.CPUCores, m.MemoryBytes, m.DiskFreeBytes = uint32(cores), uint64(mem), uint64(disk)
	m.RegisteredAt, m.LastSeen, m.RevokedAt = fromUnixNano(reg), fromUnixNano(seen), fromUnixNano(rev)
	return m, nil
}

// SetCurrentMachine implements store.Store.
func (s *Store) SetCurrentMachine(ctx context.Context, ownerID, machineID string) (_ string, err error) {
	if err := s.live(); err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("set current machine of owner %q to %q: %w", ownerID, machineID, err)
		}
	}()
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	if machineID != "" {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM machines WHERE id = ?`, machineID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return "", store.ErrNotFound
		} else if err != nil {
			return "", err
		}
	}
	var prev string
	switch err := tx.QueryRowContext(ctx, `SELECT machine_id FROM current_machines WHERE owner_id = ?`, ownerID).Scan(&prev); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return "", err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO current_machines (owner_id, machine_id, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (owner_id) DO UPDATE SET machine_id = excluded.machine_id, updated_at = excluded.updated_at`,
		ownerID, machineID, unixNano(s.opt.Now())); err != nil {
		return "", err
	}
	if err := tx.Commit(); err != nil {
		return "", err
	}
	return prev, nil
}

// CurrentMachine implements store.Store.
func (s *Store) CurrentMachine(ctx context.Context, ownerID string) (string, error) {
	if err := s.live(); err != nil {
		return "", err
	}
	var id string
	err := s.rdb.QueryRowContext(ctx, `SELECT machine_id FROM current_machines WHERE owner_id = ?`, ownerID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("current machine of owner %q: %w", ownerID, err)
	}
	return id, nil
}
