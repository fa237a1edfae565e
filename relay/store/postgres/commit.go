package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/internal/groupcommit"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

// A batch of Enqueues commits as one statement, SELECT buffer_enqueue(...)
// with one array parameter per column (enqueuefunc.go): one round trip and
// one transaction, whose commit is the batch's only fsync. The function
// locks the batch's machine_buffer_usage rows in machine order before it
// reads counts or keys or draws ids, which serialises every writer of a
// machine's buffer, in this replica and others. So the caps hold, the key
// lookup cannot miss a concurrent insert, and per machine ids increase in
// commit order: a reader's cursor (Pending's afterID) never skips a message
// committed later.
//
// A batch that fails is retried on deadlock or serialization failure, then
// split into single-message statements so an error reaches only the
// Enqueue that caused it.

type batchRequest = groupcommit.Request[rules.Item, enqueued]

const enqueueSQL = `SELECT item, message_id, is_duplicate, held_messages, held_bytes
	FROM buffer_enqueue($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`

// commit is the groupcommit.CommitFunc.
func (s *Store) commit(ctx context.Context, batch []*batchRequest) {
	items := make([]rules.Item, len(batch))
	for i, r := range batch {
		items[i] = r.In
	}
	outs, err := s.commitRetry(ctx, items)
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
	s.log.Warn("postgres store: batch failed; committing its messages one by one", "messages", len(batch), "err", err)
	for _, r := range batch {
		out, err := s.commitRetry(ctx, []rules.Item{r.In})
		if err != nil {
			r.Err = err
			continue
		}
		r.Out, r.Err = out[0].enqueued, out[0].err
	}
}

type result struct {
	enqueued
	err error
}

func (s *Store) commitRetry(ctx context.Context, items []rules.Item) ([]result, error) {
	for attempt := 1; ; attempt++ {
		outs, err := s.commitItems(ctx, items)
		var pgErr *pgconn.PgError
		if err != nil && attempt < 3 && errors.As(err, &pgErr) &&
			(pgErr.Code == "40P01" || pgErr.Code == "40001") { // deadlock_detected, serialization_failure
			continue
		}
		return outs, err
	}
}

// commitItems commits items in one statement and returns each one's
// outcome. An error means nothing was committed, or, if the connection
// failed during the commit, that it is unknown whether it was; the
// callers' retries with the same keys are then deduplicated.
func (s *Store) commitItems(ctx context.Context, items []rules.Item) ([]result, error) {
	// Repeats of one key within the batch are sent once and share the
	// first one's outcome.
	res := make([]result, len(items))
	sent := make([]int, 0, len(items)) // item index of each array element
	first := make(map[rules.Key]int)
	dupOf := make([]int, len(items))
	var a enqueueArrays
	for i := range items {
		dupOf[i] = -1
		m := &items[i].Msg
		if m.IdempotencyKey != "" {
			k := rules.Key{MachineID: m.MachineID, IdempotencyKey: m.IdempotencyKey}
			if j, ok := first[k]; ok {
				dupOf[i] = j
				continue
			}
			first[k] = i
		}
		sent = append(sent, i)
		a.add(&items[i])
	}

	rows, _ := s.pool.Query(ctx, enqueueSQL, a.machine, a.owner, a.key, a.service, a.method,
		a.metadata, a.payload, a.size, a.created, a.expires, a.maxMessages, a.maxBytes, s.opt.Now())
	var (
		item     int
		id, n, b int64
		dup      bool
		got      int
	)
	_, err := pgx.ForEachRow(rows, []any{&item, &id, &dup, &n, &b}, func() error {
		if item < 1 || item > len(sent) {
			return fmt.Errorf("buffer_enqueue returned item %d of %d", item, len(sent))
		}
		i := sent[item-1]
		got++
		if id < 0 {
			return fmt.Errorf("buffer_enqueue found no stored id for duplicate item %d", item)
		}
		if id == 0 {
			m, lim := &items[i].Msg, items[i].Lim
			res[i].err = fmt.Errorf("%w: machine %q holds %d messages, %d bytes; a %d-byte message exceeds the limit of %d messages, %d bytes",
				store.ErrBufferFull, m.MachineID, n, b, m.Size(), lim.MaxMessages, lim.MaxBytes)
			return nil
		}
		res[i].enqueued = enqueued{id: id, dup: dup}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store %d messages: %w", len(sent), err)
	}
	if got != len(sent) {
		return nil, fmt.Errorf("store %d messages: buffer_enqueue returned %d rows", len(sent), got)
	}
	for i, j := range dupOf {
		if j >= 0 {
			res[i] = res[j]
			if res[i].err == nil {
				res[i].dup = true
			}
		}
	}
	return res, nil
}

// enqueueArrays are buffer_enqueue's array parameters.
type enqueueArrays struct {
	size, maxMessages, maxBytes                    []int64
	machine, owner, key, service, method, metadata []string
	payload                                        [][]byte
	created, expires                               []time.Time
}

func (a *enqueueArrays) add(it *rules.Item) {
	m := &it.Msg
	md := "{}"
	if len(m.Metadata) > 0 {
		b, _ := json.Marshal(m.Metadata) // a map[string]string always marshals
		md = string(b)
	}
	payload := m.Payload
	if payload == nil {
		payload = []byte{} // NULL would violate NOT NULL
	}
	a.size = append(a.size, m.Size())
	a.maxMessages = append(a.maxMessages, int64(it.Lim.MaxMessages))
	a.maxBytes = append(a.maxBytes, it.Lim.MaxBytes)
	a.machine = append(a.machine, m.MachineID)
	a.owner = append(a.owner, m.OwnerID)
	a.key = append(a.key, m.IdempotencyKey)
	a.service = append(a.service, m.Service)
	a.method = append(a.method, m.Method)
	a.metadata = append(a.metadata, md)
	a.payload = append(a.payload, payload)
	a.created = append(a.created, m.CreatedAt)
	a.expires = append(a.expires, m.ExpiresAt)
}
