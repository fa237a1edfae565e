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

// Machine certificates and revocations. UpsertMachine, RecordCertificate,
// RevokeMachine and DeleteMachine take the machine's advisory lock first
// (lockMachine). Without it, under READ COMMITTED, a revocation racing a
// first registration could miss the row being inserted (its UPDATE does not
// see it) while the registration missed the revocation (not committed yet):
// a revoked machine listed as live. Likewise for a certificate recorded
// while its machine is revoked. Each statement after the lock takes a new
// snapshot, so it sees what the previous holder committed.

// machineLockSpace is the first key of the per-machine advisory locks
// ("bcmc"); the second is hashtext(machine id). Two-key advisory locks do
// not collide with migrationLock's one-key lock.
const machineLockSpace int32 = 0x62636d63

// lockMachine takes machine id's advisory lock until tx ends.
func lockMachine(ctx context.Context, tx pgx.Tx, id string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, machineLockSpace, id); err != nil {
		return fmt.Errorf("lock machine: %w", err)
	}
	return nil
}

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
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockMachine(ctx, tx, machineID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO machine_certs (serial, machine_id, not_after) VALUES ($1, $2, $3)
			ON CONFLICT (serial) DO UPDATE SET not_after = EXCLUDED.not_after
			WHERE machine_certs.machine_id = EXCLUDED.machine_id`, serial, machineID, notAfter)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("serial recorded for another machine: %w", store.ErrExists)
		}
		tag, err = tx.Exec(ctx, `INSERT INTO revoked_certs (serial, machine_id, revoked_at)
			SELECT $1, machine_id, revoked_at FROM revoked_machines WHERE machine_id = $2
			ON CONFLICT DO NOTHING`, serial, machineID)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return publish(ctx, tx, store.ChangeMachine, machineID)
	})
	if err != nil {
		return fmt.Errorf("record certificate %s of machine %q: %w", serial, machineID, err)
	}
	return nil
}

// revoke queues on b what revokes machine id at at: the revocation (the
// first one's time stays), its row if any, its recorded certificates, and
// the notification. One batch, one round trip.
func revoke(b *pgx.Batch, id string, at time.Time) {
	b.Queue(`INSERT INTO revoked_machines (machine_id, revoked_at) VALUES ($1, $2) ON CONFLICT DO NOTHING`, id, at)
	b.Queue(`UPDATE machines SET revoked_at = r.revoked_at FROM revoked_machines r
		WHERE machines.id = $1 AND r.machine_id = $1 AND machines.revoked_at IS NULL`, id)
	b.Queue(`INSERT INTO revoked_certs (serial, machine_id, revoked_at)
		SELECT serial, machine_id, $2 FROM machine_certs WHERE machine_id = $1
		ON CONFLICT DO NOTHING`, id, at)
	b.Queue(notifySQL, payload(store.ChangeMachine, id))
}

// RevokeMachine implements store.Identity. A zero at means now.
func (s *Store) RevokeMachine(ctx context.Context, id string, at time.Time) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := rules.ID("machine id", id); err != nil {
		return fmt.Errorf("revoke machine %q: %w", id, err)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockMachine(ctx, tx, id); err != nil {
			return err
		}
		var b pgx.Batch
		revoke(&b, id, rules.Time(at, s.opt.Now()))
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return fmt.Errorf("revoke machine %q: %w", id, err)
	}
	return nil
}

// DeleteMachine implements store.Identity. It locks, in this order, the
// machine, its row and its buffer's usage row: Enqueue and PurgeExpired
// take usage rows first too. Ack deletes messages before it debits the
// usage row, so it can deadlock with this; the loser is retried.
func (s *Store) DeleteMachine(ctx context.Context, id string, at time.Time) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := rules.ID("machine id", id); err != nil {
		return fmt.Errorf("delete machine %q: %w", id, err)
	}
	at = rules.Time(at, s.opt.Now())
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		if err = s.deleteMachine(ctx, id, at); err == nil || !retryable(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("delete machine %q: %w", id, err)
	}
	return nil
}

func (s *Store) deleteMachine(ctx context.Context, id string, at time.Time) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockMachine(ctx, tx, id); err != nil {
			return err
		}
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1 FROM machines WHERE id = $1 FOR UPDATE`, id).Scan(&one); err != nil {
			return notFound(err)
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM machine_buffer_usage WHERE machine_id = $1 FOR UPDATE`, id); err != nil {
			return fmt.Errorf("lock buffer usage: %w", err)
		}
		var b pgx.Batch
		revoke(&b, id, at)
		// The buffer and its usage row go together, so Counts stays exact
		// (and a later Enqueue for the id starts a fresh usage row).
		b.Queue(`DELETE FROM buffered_messages WHERE machine_id = $1`, id)
		b.Queue(`DELETE FROM machine_buffer_usage WHERE machine_id = $1`, id)
		b.Queue(`DELETE FROM current_machines WHERE machine_id = $1`, id)
		b.Queue(`DELETE FROM machine_certs WHERE machine_id = $1`, id)
		b.Queue(`DELETE FROM machines WHERE id = $1`, id)
		return tx.SendBatch(ctx, &b).Close()
	})
}

// Revocations implements store.Identity: one statement, so one snapshot.
func (s *Store) Revocations(ctx context.Context) (machineIDs, serials []string, err error) {
	if err := s.live(); err != nil {
		return nil, nil, err
	}
	rows, _ := s.pool.Query(ctx, `SELECT true, machine_id FROM revoked_machines
		UNION ALL SELECT false, serial FROM revoked_certs ORDER BY 1, 2`)
	var (
		machine bool
		v       string
	)
	_, err = pgx.ForEachRow(rows, []any{&machine, &v}, func() error {
		if machine {
			machineIDs = append(machineIDs, v)
		} else {
			serials = append(serials, v)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list revocations: %w", err)
	}
	return machineIDs, serials, nil
}

// AllMachines implements store.Identity.
func (s *Store) AllMachines(ctx context.Context) ([]store.Machine, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	rows, _ := s.pool.Query(ctx, `SELECT `+selectColumns+` FROM machines ORDER BY id`)
	ms, err := pgx.CollectRows(rows, scanMachine)
	if err != nil {
		return nil, fmt.Errorf("list all machines: %w", err)
	}
	return ms, nil
}
