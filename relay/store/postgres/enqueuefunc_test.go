package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
)

// TestEnqueueFastPaths commits hand-made batches (as one Enqueue batch
// would be) and checks buffer_enqueue_fast's fast path and each reason to
// fall back to buffer_enqueue: a machine that may fill up, a new machine
// whose batch alone does not fit, and a stored key. After each batch the
// usage rows must match the stored messages.
func TestEnqueueFastPaths(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, pgtest.URL(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	item := func(machine, key string, lim store.Limits) rules.Item {
		m := store.Message{MachineID: machine, IdempotencyKey: key, Payload: []byte("0123456789")}
		lim, err := rules.Message(&m, lim, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return rules.Item{Msg: m, Lim: lim}
	}
	// fastPath reports whether the batch would take the fast path: the
	// test calls the function again inside a transaction it rolls back.
	fastPath := func(items []rules.Item) bool {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		var ids []int64
		c := newEnqueueCall(items, time.Now())
		if err := tx.QueryRow(ctx, `SELECT ids FROM buffer_enqueue_fast($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) LIMIT 1`,
			c.args...).Scan(&ids); err != nil {
			t.Fatal(err)
		}
		return ids != nil
	}
	commit := func(name string, wantFast bool, items ...rules.Item) []result {
		t.Helper()
		if fast := fastPath(items); fast != wantFast {
			t.Errorf("%s: fast path %v; want %v", name, fast, wantFast)
		}
		outs, err := s.commitRetry(ctx, items)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rows, err := s.pool.Query(ctx, `SELECT coalesce(m.machine_id, u.machine_id), u.messages, u.bytes, count(m.id), coalesce(sum(m.size), 0)
			FROM machine_buffer_usage u FULL JOIN buffered_messages m ON m.machine_id = u.machine_id
			GROUP BY 1, 2, 3`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var machine string
			var n, b, count, sum int64
			if err := rows.Scan(&machine, &n, &b, &count, &sum); err != nil {
				t.Fatal(err)
			}
			if n != count || b != sum {
				t.Errorf("%s: machine %s usage %d messages, %d bytes; stored %d, %d", name, machine, n, b, count, sum)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return outs
	}
	stored := func(name string, outs []result, i int) int64 {
		t.Helper()
		if outs[i].err != nil || outs[i].dup || outs[i].id <= 0 {
			t.Errorf("%s: item %d = %+v; want stored", name, i, outs[i])
		}
		return outs[i].id
	}

	// The relay gives every message the same limits; a batch whose
	// messages differ is checked against the smallest.
	lim := store.Limits{MaxMessages: 3}
	outs := commit("fits", true, item("a", "a1", lim), item("b", "b1", lim), item("a", "", lim))
	a1, b1, a2 := stored("fits", outs, 0), stored("fits", outs, 1), stored("fits", outs, 2)
	if !(a1 < b1 && b1 < a2) {
		t.Errorf("fits: ids %d, %d, %d not in arrival order", a1, b1, a2)
	}

	// b fills up: the batch falls back; a's message is stored, b's until
	// b is full, in order.
	outs = commit("b fills up", false, item("a", "a3", lim), item("b", "b2", lim), item("b", "b3", lim), item("b", "b4", lim))
	a3, b2, b3 := stored("b fills up", outs, 0), stored("b fills up", outs, 1), stored("b fills up", outs, 2)
	if !errors.Is(outs[3].err, store.ErrBufferFull) {
		t.Errorf("b fills up: b's third message = %+v; want ErrBufferFull", outs[3])
	}
	if !(a2 < a3 && a3 < b2 && b2 < b3) {
		t.Errorf("b fills up: ids %d, %d, %d after %d not in arrival order", a3, b2, b3, a2)
	}

	// A repeat of a stored key on a full buffer is still a duplicate.
	outs = commit("full duplicate", false, item("a", "a1", lim))
	if outs[0].err != nil || !outs[0].dup || outs[0].id != a1 {
		t.Errorf("full duplicate: repeat of a1 = %+v; want duplicate of %d", outs[0], a1)
	}

	// A stored key in a batch that fits: the unique index refuses the fast
	// path; the duplicate gets the stored id and the rest is stored.
	c1 := stored("c", commit("c", true, item("c", "c1", lim)), 0)
	outs = commit("duplicate", false, item("c", "c2", lim), item("c", "c1", lim))
	stored("duplicate", outs, 0)
	if outs[1].err != nil || !outs[1].dup || outs[1].id != c1 {
		t.Errorf("duplicate: repeat of c1 = %+v; want duplicate of %d", outs[1], c1)
	}

	// A new machine whose batch alone does not fit.
	outs = commit("new machine", false, item("d", "d1", lim), item("d", "d2", lim), item("d", "d3", lim), item("d", "d4", lim))
	stored("new machine", outs, 2)
	if !errors.Is(outs[3].err, store.ErrBufferFull) {
		t.Errorf("new machine: fourth message = %+v; want ErrBufferFull", outs[3])
	}

	// The failed fast paths left nothing behind: a fitting batch is fast.
	commit("fits again", true, item("c", "c3", lim), item("e", "e1", lim))
}
