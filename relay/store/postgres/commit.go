package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/betcode-dev/betcode/relay/store/internal/groupcommit"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

// A batch of Enqueues commits as one statement, SELECT ... FROM
// buffer_enqueue_fast(...) with one array parameter per column
// (enqueuefunc.go): one transaction, whose commit is the batch's only
// fsync. The function locks the batch's machine_buffer_usage rows in
// machine order before it draws ids, which serialises every writer of a
// machine's buffer, in this replica and others. So the caps hold, the key
// checks cannot miss a concurrent insert, and per machine ids increase in
// commit order: a reader's cursor (Pending's afterID) never skips a message
// committed later.
//
// Each writer sends its batches on one connection in pipeline mode
// (pipeline.go), the next batch while the previous one commits. The
// server runs them in order, so batches keep their arrival order.
//
// A batch that fails is retried on deadlock or serialization failure, then
// split into single-message statements so an error reaches only the
// Enqueue that caused it. These retries run on other connections of the
// pool, after the batches sent behind the failed one; so on that path a
// message can get a larger id than one that arrived after it (both still
// drawn under the machine's lock).

type batchRequest = groupcommit.Request[rules.Item, enqueued]

// enqueueStatement names the prepared enqueueSQL on the writers'
// connections.
const enqueueStatement = "buffer_enqueue_fast"

const enqueueSQL = `SELECT item, message_id, is_duplicate, held_messages, held_bytes, ids
	FROM buffer_enqueue_fast($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`

type result struct {
	enqueued
	err error
}

// enqueueCall is one batch's call of buffer_enqueue_fast.
type enqueueCall struct {
	items []rules.Item
	// sent holds the item index of each array element. Repeats of one key
	// within the batch are sent once: dupOf[i] >= 0 is the index of the
	// first item with item i's key.
	sent  []int
	dupOf []int
	args  []any
}

func newEnqueueCall(items []rules.Item, now time.Time) *enqueueCall {
	c := &enqueueCall{items: items, sent: make([]int, 0, len(items)), dupOf: make([]int, len(items))}
	first := make(map[rules.Key]int)
	a := newEnqueueArrays(len(items))
	for i := range items {
		c.dupOf[i] = -1
		m := &items[i].Msg
		if m.IdempotencyKey != "" {
			k := rules.Key{MachineID: m.MachineID, IdempotencyKey: m.IdempotencyKey}
			if j, ok := first[k]; ok {
				c.dupOf[i] = j
				continue
			}
			first[k] = i
		}
		c.sent = append(c.sent, i)
		a.add(&items[i])
	}
	c.args = []any{a.machine, a.owner, a.key, a.service, a.method, a.metadata, a.payload, a.size,
		a.created, a.expires, a.maxMessages, a.maxBytes, now, a.fitMessages, a.fitBytes, len(a.machines)}
	return c
}

// scan reads the call's rows and returns each item's outcome. It closes
// rows.
func (c *enqueueCall) scan(rows pgx.Rows) ([]result, error) {
	res := make([]result, len(c.items))
	var (
		item     int
		id, n, b int64
		dup      bool
		ids      []int64
		got      int
	)
	_, err := pgx.ForEachRow(rows, []any{&item, &id, &dup, &n, &b, &ids}, func() error {
		if ids != nil { // the fast path: every message stored
			if len(ids) != len(c.sent) {
				return fmt.Errorf("buffer_enqueue_fast returned %d ids for %d messages", len(ids), len(c.sent))
			}
			for k, i := range c.sent {
				res[i].enqueued = enqueued{id: ids[k]}
			}
			got += len(ids)
			return nil
		}
		if item < 1 || item > len(c.sent) {
			return fmt.Errorf("buffer_enqueue returned item %d of %d", item, len(c.sent))
		}
		i := c.sent[item-1]
		got++
		if id < 0 {
			return fmt.Errorf("buffer_enqueue found no stored id for duplicate item %d", item)
		}
		if id == 0 {
			res[i].err = rules.BufferFull(&c.items[i].Msg, c.items[i].Lim, rules.Usage{Messages: n, Bytes: b})
			return nil
		}
		res[i].enqueued = enqueued{id: id, dup: dup}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store %d messages: %w", len(c.sent), err)
	}
	if got != len(c.sent) {
		return nil, fmt.Errorf("store %d messages: buffer_enqueue_fast returned %d outcomes", len(c.sent), got)
	}
	for i, j := range c.dupOf {
		if j >= 0 {
			res[i] = res[j]
			if res[i].err == nil {
				res[i].dup = true
			}
		}
	}
	return res, nil
}

// finish sets the outcome of batch, whose items were committed with outs,
// or failed with err. A failed batch is retried on a pool connection, then
// split into single messages.
func (s *Store) finish(ctx context.Context, batch []*batchRequest, items []rules.Item, outs []result, err error) {
	if err != nil && (retryable(err) || repeatable(ctx, err, items)) {
		outs, err = s.commitRetry(ctx, items)
	}
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
	s.opt.Logger.Warn("postgres store: batch failed; committing its messages one by one", "messages", len(batch), "err", err)
	for _, r := range batch {
		out, err := s.commitRetry(ctx, []rules.Item{r.In})
		if err != nil {
			r.Err = err
			continue
		}
		r.Out, r.Err = out[0].enqueued, out[0].err
	}
}

// retryable reports a deadlock or serialization failure.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// repeatable reports a batch that failed with its connection (a backend
// killed, a failover), not with an answer of the server, and may be sent
// again: every message carries an idempotency key, so if the first attempt
// did commit, buffer_enqueue_fast answers the repeat with the first ids.
// A message without a key is not repeated: it could be stored twice.
func repeatable(ctx context.Context, err error, items []rules.Item) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	// The server's own errors are answers, except that it is ending the
	// connection (57P01-57P03: an administrator, a crash, a restart) or
	// that the connection failed (class 08).
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !strings.HasPrefix(pgErr.Code, "57P0") && !strings.HasPrefix(pgErr.Code, "08") {
		return false
	}
	for _, it := range items {
		if it.Msg.IdempotencyKey == "" {
			return false
		}
	}
	return true
}

// commitRetry commits items on a pool connection, retrying twice on
// deadlock or serialization failure and, when repeatable, once per pool
// connection on a lost connection (each failure discards a connection that
// died while idle in the pool).
func (s *Store) commitRetry(ctx context.Context, items []rules.Item) ([]result, error) {
	lost := int32(0)
	for attempt := 1; ; attempt++ {
		c := newEnqueueCall(items, s.opt.Now())
		rows, _ := s.pool.Query(ctx, enqueueSQL, c.args...)
		outs, err := c.scan(rows)
		switch {
		case err != nil && attempt < 3 && retryable(err):
			continue
		case repeatable(ctx, err, items) && lost < s.pool.Config().MaxConns && s.live() == nil:
			lost++
			continue
		}
		return outs, err
	}
}

// enqueueArrays are buffer_enqueue_fast's parameters: one array element
// per message, the smallest limits and the distinct machines.
type enqueueArrays struct {
	size, maxMessages, maxBytes                    []int64
	machine, owner, key, service, method, metadata []string
	payload                                        [][]byte
	created, expires                               []time.Time
	fitMessages, fitBytes                          int64
	machines                                       map[string]struct{}
}

func newEnqueueArrays(n int) enqueueArrays {
	return enqueueArrays{
		size: make([]int64, 0, n), maxMessages: make([]int64, 0, n), maxBytes: make([]int64, 0, n),
		machine: make([]string, 0, n), owner: make([]string, 0, n), key: make([]string, 0, n),
		service: make([]string, 0, n), method: make([]string, 0, n), metadata: make([]string, 0, n),
		payload: make([][]byte, 0, n), created: make([]time.Time, 0, n), expires: make([]time.Time, 0, n),
		machines: make(map[string]struct{}),
	}
}

func (a *enqueueArrays) add(it *rules.Item) {
	m := &it.Msg
	if len(a.machines) == 0 {
		a.fitMessages, a.fitBytes = int64(it.Lim.MaxMessages), it.Lim.MaxBytes
	}
	a.machines[m.MachineID] = struct{}{}
	a.fitMessages = min(a.fitMessages, int64(it.Lim.MaxMessages))
	a.fitBytes = min(a.fitBytes, it.Lim.MaxBytes)
	a.size = append(a.size, m.Size())
	a.maxMessages = append(a.maxMessages, int64(it.Lim.MaxMessages))
	a.maxBytes = append(a.maxBytes, it.Lim.MaxBytes)
	a.machine = append(a.machine, m.MachineID)
	a.owner = append(a.owner, m.OwnerID)
	a.key = append(a.key, m.IdempotencyKey)
	a.service = append(a.service, m.Service)
	a.method = append(a.method, m.Method)
	a.metadata = append(a.metadata, rules.MetadataJSON(m.Metadata))
	a.payload = append(a.payload, m.Payload)
	a.created = append(a.created, m.CreatedAt)
	a.expires = append(a.expires, m.ExpiresAt)
}
