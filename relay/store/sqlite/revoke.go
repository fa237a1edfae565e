package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

// Machine certificates and revocations. Each method is one write
// transaction, so a revocation and a registration or certificate of the
// same machine never interleave (store/postgres needs an advisory lock for
// that).

// RecordCertificate implements store.Identity. Recording a serial again
// for the same machine updates its expiry; for another machine it gives
// ErrExists. A certificate recorded for a machine already revoked is
// revoked at once (and ChangeMachine published): an enrollment that raced
// the revocation cannot leave a live certificate behind.
func (s *Store) RecordCertificate(ctx context.Context, machineID, serial string, notAfter time.Time) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := errors.Join(rules.ID("machine id", machineID), rules.Serial(serial)); err != nil {
		return fmt.Errorf("record certificate %s of machine %q: %w", serial, machineID, err)
	}
	err := s.write(ctx, func(tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO machine_certs (serial, machine_id, not_after) VALUES (?, ?, ?)
			ON CONFLICT (serial) DO UPDATE SET not_after = excluded.not_after
			WHERE machine_certs.machine_id = excluded.machine_id`, serial, machineID, unixNano(notAfter))
		if err != nil {
			return err
		}
		if err := affected(res, fmt.Errorf("serial recorded for another machine: %w", store.ErrExists)); err != nil {
			return err
		}
		res, err = tx.ExecContext(ctx, `INSERT INTO revoked_certs (serial, machine_id, revoked_at)
			SELECT ?, machine_id, revoked_at FROM revoked_machines WHERE machine_id = ?
			ON CONFLICT DO NOTHING`, serial, machineID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // n == 0: the machine is not revoked
		}
		return tx.publish(ctx, store.ChangeMachine, machineID)
	})
	if err != nil {
		return fmt.Errorf("record certificate %s of machine %q: %w", serial, machineID, err)
	}
	return nil
}

// revoke revokes machine id at at (the first revocation's time stays), its
// row if any and its recorded certificates, and publishes the change.
func (tx *writeTx) revoke(ctx context.Context, id string, at int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO revoked_machines (machine_id, revoked_at) VALUES (?, ?)
		ON CONFLICT DO NOTHING`, id, at); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE machines SET revoked_at = (SELECT revoked_at FROM revoked_machines WHERE machine_id = ?1)
		WHERE id = ?1 AND revoked_at = 0`, id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO revoked_certs (serial, machine_id, revoked_at)
		SELECT serial, machine_id, ? FROM machine_certs WHERE machine_id = ?
		ON CONFLICT DO NOTHING`, at, id); err != nil {
		return err
	}
	return tx.publish(ctx, store.ChangeMachine, id)
}

// RevokeMachine implements store.Identity. A zero at means now.
func (s *Store) RevokeMachine(ctx context.Context, id string, at time.Time) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := rules.ID("machine id", id); err != nil {
		return fmt.Errorf("revoke machine %q: %w", id, err)
	}
	ns := unixNano(rules.Time(at, s.opt.Now()))
	if err := s.write(ctx, func(tx *writeTx) error { return tx.revoke(ctx, id, ns) }); err != nil {
		return fmt.Errorf("revoke machine %q: %w", id, err)
	}
	return nil
}

// DeleteMachine implements store.Identity. The buffer's messages and its
// usage row go together, so Counts stays exact (and a later Enqueue for
// the id starts a fresh usage row).
func (s *Store) DeleteMachine(ctx context.Context, id string, at time.Time) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := rules.ID("machine id", id); err != nil {
		return fmt.Errorf("delete machine %q: %w", id, err)
	}
	ns := unixNano(rules.Time(at, s.opt.Now()))
	err := s.write(ctx, func(tx *writeTx) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM machines WHERE id = ?`, id).Scan(&one); err != nil {
			return noRows(err)
		}
		if err := tx.revoke(ctx, id, ns); err != nil {
			return err
		}
		for _, q := range []string{
			`DELETE FROM buffered_messages WHERE machine_id = ?`,
			`DELETE FROM machine_buffer_usage WHERE machine_id = ?`,
			`DELETE FROM current_machines WHERE machine_id = ?`,
			`DELETE FROM machine_certs WHERE machine_id = ?`,
			`DELETE FROM machines WHERE id = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete machine %q: %w", id, err)
	}
	return nil
}

// Revocations implements store.Identity: one statement, so one snapshot.
func (s *Store) Revocations(ctx context.Context) (machineIDs, serials []string, err error) {
	if err := s.live(); err != nil {
		return nil, nil, err
	}
	type revoked struct {
		machine bool
		v       string
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT 1, machine_id FROM revoked_machines
		UNION ALL SELECT 0, serial FROM revoked_certs ORDER BY 1, 2`)
	rs, err := collect(rows, err, func(row scanner) (revoked, error) {
		var r revoked
		err := row.Scan(&r.machine, &r.v)
		return r, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list revocations: %w", err)
	}
	for _, r := range rs {
		if r.machine {
			machineIDs = append(machineIDs, r.v)
		} else {
			serials = append(serials, r.v)
		}
	}
	return machineIDs, serials, nil
}

// AllMachines implements store.Identity.
func (s *Store) AllMachines(ctx context.Context) ([]store.Machine, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	ms, err := s.queryMachines(ctx, `SELECT `+selectColumns+` FROM machines ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list all machines: %w", err)
	}
	return ms, nil
}
