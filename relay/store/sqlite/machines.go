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

const machineColumns = `id, owner_id, name, hostname, capabilities, os, arch, version,
	cpu_cores, memory_bytes, disk_free_bytes, registered_at, last_seen`

// selectColumns are machineColumns plus the replica, which only
// SetMachineReplica and ClearMachineReplica write.
const selectColumns = machineColumns + `, replica`

// UpsertMachine implements store.Store.
func (s *Store) UpsertMachine(ctx context.Context, m store.Machine) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := rules.Machine(&m, s.opt.Now()); err != nil {
		return fmt.Errorf("upsert machine %q: %w", m.ID, err)
	}
	capsJSON, _ := json.Marshal(m.Capabilities) // a []string always marshals
	// The WHERE makes the update a no-op for another owner's machine, which
	// then changes no row.
	res, err := s.wdb.ExecContext(ctx, `INSERT INTO machines (`+machineColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET
			name = excluded.name, hostname = excluded.hostname,
			capabilities = excluded.capabilities, os = excluded.os,
			arch = excluded.arch, version = excluded.version,
			cpu_cores = excluded.cpu_cores, memory_bytes = excluded.memory_bytes,
			disk_free_bytes = excluded.disk_free_bytes, last_seen = excluded.last_seen
		WHERE machines.owner_id = excluded.owner_id`,
		m.ID, m.OwnerID, m.Name, m.Hostname, string(capsJSON), m.OS, m.Arch, m.Version,
		int64(m.CPUCores), int64(m.MemoryBytes), int64(m.DiskFreeBytes), unixNano(m.RegisteredAt), unixNano(m.LastSeen))
	if err != nil {
		return fmt.Errorf("upsert machine %q: %w", m.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("upsert machine %q: %w", m.ID, err)
	} else if n == 0 {
		return fmt.Errorf("upsert machine %q for owner %q: %w", m.ID, m.OwnerID, store.ErrConflict)
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

// ListMachines implements store.Store.
func (s *Store) ListMachines(ctx context.Context, ownerID string) (_ []store.Machine, err error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("list machines of owner %q: %w", ownerID, err)
		}
	}()
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+selectColumns+` FROM machines WHERE owner_id = ? ORDER BY id`, ownerID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ms []store.Machine
	for rows.Next() {
		m, err := scanMachine(rows)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, rows.Err()
}

func scanMachine(row interface{ Scan(...any) error }) (store.Machine, error) {
	var (
		m                store.Machine
		caps             string
		cores, mem, disk int64
		reg, seen        int64
	)
	if err := row.Scan(&m.ID, &m.OwnerID, &m.Name, &m.Hostname, &caps, &m.OS, &m.Arch, &m.Version,
		&cores, &mem, &disk, &reg, &seen, &m.Replica); err != nil {
		return m, err
	}
	if err := json.Unmarshal([]byte(caps), &m.Capabilities); err != nil {
		return m, fmt.Errorf("machine %q capabilities: %w", m.ID, err)
	}
	m.CPUCores, m.MemoryBytes, m.DiskFreeBytes = uint32(cores), uint64(mem), uint64(disk)
	m.RegisteredAt, m.LastSeen = fromUnixNano(reg), fromUnixNano(seen)
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
