package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/betcode-dev/betcode/relay/store/internal/groupcommit"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

// A batch of Enqueues commits in one immediate transaction on the single
// write connection: read the batch's usage rows and stored keys, decide
// (rules.Decide), insert the admitted messages in arrival order, write the
// usage, commit. The write lock, held from BEGIN, serialises it with every
// other writer, so counts and keys read in the transaction are exact and
// AUTOINCREMENT ids follow commit order.
//
// A batch that fails is split into single-message transactions so an error
// reaches only the Enqueue that caused it.

type batchRequest = groupcommit.Request[rules.Item, enqueued]

// commit is the groupcommit.CommitFunc.
func (s *Store) commit(ctx context.Context, batch []*batchRequest) {
	items := make([]rules.Item, len(batch))
	for i, r := range batch {
		items[i] = r.In
	}
	outs, err := s.commitItems(ctx, items)
	if err == nil {
		for i, r := range batch {
			r.Out, r.Err = outs[i].enqueued, outs[i].err
		}
		return
	}
	if len(batch) == 1 {
		batch[0].Err = err
		return
	}
	s.opt.Logger.Warn("sqlite store: batch failed; committing its messages one by one", "messages", len(batch), "err", err)
	for _, r := range batch {
		out, err := s.commitItems(ctx, []rules.Item{r.In})
		if err != nil {
			r.Err = err
			continue
		}
		r.Out, r.Err = out[0].enqueued, out[0].err
	}
}

// insertSQL stores one admitted message; it is prepared once, on Open.
const insertSQL = `INSERT INTO buffered_messages (machine_id, owner_id, idempotency_key,
		service, method, metadata, payload, size, created_at, expires_at)
	VALUES (?, ?, nullif(?, ''), ?, ?, ?, ?, ?, ?, ?)`

type result struct {
	enqueued
	err error
}

func (s *Store) commitItems(ctx context.Context, items []rules.Item) (_ []result, err error) {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()

	usage := make(map[string]rules.Usage)
	stored := make(map[rules.Key]int64)
	for i := range items {
		usage[items[i].Msg.MachineID] = rules.Usage{}
	}
	machines := slices.Sorted(maps.Keys(usage))
	if err := readUsage(ctx, tx, machines, usage); err != nil {
		return nil, err
	}
	if err := lookupKeys(ctx, tx, items, stored); err != nil {
		return nil, err
	}

	// A machine that refused an item may hold expired messages not yet
	// purged: delete them and decide again.
	locked := maps.Clone(usage)
	before := maps.Clone(usage)
	outs, full := rules.Decide(items, usage, stored)
	if len(full) > 0 {
		now := unixNano(s.opt.Now())
		for _, id := range full {
			freed, err := deleteExpired(ctx, tx, id, now)
			if err != nil {
				return nil, fmt.Errorf("delete expired messages of machine %q: %w", id, err)
			}
			u := before[id]
			u.Messages -= freed[id].Messages
			u.Bytes -= freed[id].Bytes
			before[id] = u
		}
		usage = maps.Clone(before)
		outs, _ = rules.Decide(items, usage, stored)
	}

	insert := tx.StmtContext(ctx, s.insert)
	defer insert.Close()
	res := make([]result, len(items))
	for i, o := range outs {
		switch {
		case o.Err != nil:
			res[i].err = o.Err
		case o.Insert:
			m := &items[i].Msg
			r, err := insert.ExecContext(ctx, m.MachineID, m.OwnerID, m.IdempotencyKey, m.Service, m.Method,
				rules.MetadataJSON(m.Metadata), m.Payload, m.Size(), unixNano(m.CreatedAt), unixNano(m.ExpiresAt))
			if err != nil {
				return nil, fmt.Errorf("insert message for machine %q: %w", m.MachineID, err)
			}
			if res[i].id, err = r.LastInsertId(); err != nil {
				return nil, err
			}
		case o.DupOf >= 0:
			res[i] = result{enqueued: enqueued{id: res[o.DupOf].id, dup: true}}
		default:
			res[i].enqueued = enqueued{id: o.ID, dup: true}
		}
	}
	for _, id := range machines {
		if u := usage[id]; u != locked[id] {
			if _, err := tx.ExecContext(ctx, `INSERT INTO machine_buffer_usage (machine_id, messages, bytes) VALUES (?, ?, ?)
				ON CONFLICT (machine_id) DO UPDATE SET messages = excluded.messages, bytes = excluded.bytes`,
				id, u.Messages, u.Bytes); err != nil {
				return nil, fmt.Errorf("write usage of machine %q: %w", id, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit %d messages: %w", len(items), err)
	}
	return res, nil
}

// readUsage sets the usage of the machines that have a usage row, in one
// query: the ids go in as one JSON parameter.
func readUsage(ctx context.Context, tx *sql.Tx, machines []string, usage map[string]rules.Usage) error {
	js, err := json.Marshal(machines)
	if err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT machine_id, messages, bytes FROM machine_buffer_usage
		WHERE machine_id IN (SELECT value FROM json_each(?))`, string(js))
	if err != nil {
		return fmt.Errorf("read buffer usage: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id string
			u  rules.Usage
		)
		if err := rows.Scan(&id, &u.Messages, &u.Bytes); err != nil {
			return fmt.Errorf("read buffer usage: %w", err)
		}
		usage[id] = u
	}
	return rows.Err()
}

// lookupKeys adds the batch's stored keys to stored, in one query: the
// (machine, key) pairs go in as one JSON parameter.
func lookupKeys(ctx context.Context, tx *sql.Tx, items []rules.Item, stored map[rules.Key]int64) error {
	var pairs [][2]string
	for i := range items {
		if m := &items[i].Msg; m.IdempotencyKey != "" {
			pairs = append(pairs, [2]string{m.MachineID, m.IdempotencyKey})
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	js, err := json.Marshal(pairs)
	if err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT m.machine_id, m.idempotency_key, m.id
		FROM json_each(?) AS k
		JOIN buffered_messages AS m
			ON m.machine_id = k.value ->> 0 AND m.idempotency_key = k.value ->> 1`, string(js))
	if err != nil {
		return fmt.Errorf("look up idempotency keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k  rules.Key
			id int64
		)
		if err := rows.Scan(&k.MachineID, &k.IdempotencyKey, &id); err != nil {
			return fmt.Errorf("look up idempotency keys: %w", err)
		}
		stored[k] = id
	}
	return rows.Err()
}
