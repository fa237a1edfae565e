package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/postgres"
	"github.com/betcode-dev/betcode/relay/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newDB gives each test its own schema.
func newDB(tb testing.TB) storetest.Open {
	url := pgtest.URL(tb)
	return func(tb testing.TB) store.Store {
		s, err := postgres.Open(tb.Context(), url, postgres.Options{Logger: slog.New(slog.NewTextHandler(tbWriter{tb}, nil))})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = s.Close() })
		return s
	}
}

type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) { w.tb.Log(string(p)); return len(p), nil }

func TestStore(t *testing.T) { storetest.Run(t, newDB) }

// TestReplicas runs several stores on one database, as relay replicas do:
// they migrate it at once, and their Enqueues to one machine share its caps.
func TestReplicas(t *testing.T) {
	ctx := t.Context()
	url := pgtest.URL(t)
	const replicas = 4
	stores := make([]*postgres.Store, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() { stores[i], errs[i] = postgres.Open(ctx, url, postgres.Options{}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		t.Cleanup(func() { _ = stores[i].Close() })
	}

	const limit, each = 50, 40
	var stored, full atomic.Int64
	for r, s := range stores {
		for g := range 4 {
			wg.Go(func() {
				for i := range each {
					m := store.Message{MachineID: "m1", IdempotencyKey: fmt.Sprintf("r%d-g%d-%d", r, g, i), Payload: []byte("x")}
					_, _, err := s.Enqueue(ctx, m, store.Limits{MaxMessages: limit})
					switch {
					case err == nil:
						stored.Add(1)
					case errors.Is(err, store.ErrBufferFull):
						full.Add(1)
					default:
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	n, _, err := stores[0].Counts(ctx, "m1")
	if err != nil || n != limit || stored.Load() != limit || full.Load() != replicas*4*each-limit {
		t.Errorf("Counts = %d, %v; %d stored, %d refused; want %d stored, the rest refused", n, err, stored.Load(), full.Load(), limit)
	}
	msgs, err := stores[1].Pending(ctx, "m1", 0, 2*limit)
	if err != nil || len(msgs) != limit {
		t.Errorf("Pending = %d messages, %v; want %d", len(msgs), err, limit)
	}
}

// sent is one Enqueue call and its outcome.
type sent struct {
	key string
	id  int64
	dup bool
	err error
}

// produce runs producers goroutines that each enqueue messages with keys
// "g<producer>-<i>" to machine m1 until stop reports true or an Enqueue
// fails with ErrClosed, and returns every call's outcome per producer.
func produce(t *testing.T, s store.Store, producers int, stop func(calls int) bool) [][]sent {
	out := make([][]sent, producers)
	var wg sync.WaitGroup
	for g := range producers {
		wg.Go(func() {
			for i := 0; !stop(i); i++ {
				key := fmt.Sprintf("g%d-%d", g, i)
				id, dup, err := s.Enqueue(t.Context(), store.Message{MachineID: "m1", IdempotencyKey: key, Payload: []byte(key)}, store.Limits{})
				out[g] = append(out[g], sent{key, id, dup, err})
				if errors.Is(err, store.ErrClosed) {
					return
				}
			}
		})
	}
	wg.Wait()
	return out
}

// checkStored checks the calls that succeeded against what machine m1's
// buffer holds: each under the id it was given, each producer's in order.
// It returns how many succeeded.
func checkStored(t *testing.T, s store.Store, calls [][]sent) int {
	ctx := t.Context()
	stored := make(map[string]int64)
	var after int64
	for {
		page, err := s.Pending(ctx, "m1", after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			stored[m.IdempotencyKey] = m.ID
		}
		after = page[len(page)-1].ID
	}
	if n, _, err := s.Counts(ctx, "m1"); err != nil || n != len(stored) {
		t.Errorf("Counts = %d, %v; Pending returned %d", n, err, len(stored))
	}
	ok := 0
	for g, calls := range calls {
		var last int64
		for _, c := range calls {
			if c.err != nil {
				continue
			}
			ok++
			if id, found := stored[c.key]; !found || id != c.id {
				t.Errorf("producer %d: %s enqueued as %d (duplicate %v); stored as %d (found %v)", g, c.key, c.id, c.dup, id, found)
			}
			if c.id <= last {
				t.Errorf("producer %d: %s got id %d after %d", g, c.key, c.id, last)
			}
			last = c.id
		}
	}
	return ok
}

// TestWriterConnectionLost kills the backends that run Enqueue batches
// while producers enqueue. Calls may fail, but every call that succeeded
// is stored under the id it returned, in each producer's order, and the
// store recovers.
func TestWriterConnectionLost(t *testing.T) {
	ctx := t.Context()
	url := pgtest.URL(t)
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)

	var killed atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for killed.Load() < 5 {
			var n int64
			if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid()
					AND query LIKE '%buffer_enqueue_fast(%'`).Scan(&n); err != nil {
				t.Error(err)
				return
			}
			killed.Add(n)
			runtime.Gosched()
		}
	}()
	calls := produce(t, s, 8, func(i int) bool {
		select {
		case <-done:
			return i >= 20 // then some more, to see the store recover
		default:
			return false
		}
	})
	failed := 0
	for _, calls := range calls {
		for _, c := range calls[len(calls)-5:] {
			if c.err != nil {
				t.Errorf("%s after the kills: %v", c.key, c.err)
			}
		}
		for _, c := range calls {
			if c.err != nil {
				failed++
			}
		}
	}
	ok := checkStored(t, s, calls)
	t.Logf("%d backends killed; %d calls stored, %d failed", killed.Load(), ok, failed)
}

// TestCloseDrains closes the store while producers enqueue: every call
// either is stored under the id it returned or fails with ErrClosed.
func TestCloseDrains(t *testing.T) {
	ctx := t.Context()
	url := pgtest.URL(t)
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for calls.Load() < 300 {
			runtime.Gosched()
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	sent := produce(t, s, 16, func(int) bool { calls.Add(1); return false })
	<-closed
	for _, calls := range sent {
		for _, c := range calls {
			if c.err != nil && !errors.Is(c.err, store.ErrClosed) {
				t.Errorf("%s: %v; want success or ErrClosed", c.key, c.err)
			}
		}
	}
	s, err = postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if checkStored(t, s, sent) == 0 {
		t.Error("nothing stored before Close")
	}
}

// TestWatchReconnect terminates the backend Watch listens on, three times:
// each time Watch listens again, reports ChangeAll (changes may have been
// missed meanwhile), and the changes after it arrive.
func TestWatchReconnect(t *testing.T) {
	ctx := t.Context()
	url := pgtest.URL(t)
	s, err := postgres.Open(ctx, url, postgres.Options{Logger: slog.New(slog.NewTextHandler(tbWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if err := s.CreateUser(ctx, store.User{ID: "alice"}); err != nil {
		t.Fatal(err)
	}

	w := storetest.StartWatch(t, s)
	w.ExpectAll(t, 5*time.Second)
	for round := range 3 {
		var killed int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND query = 'LISTEN betcode_identity'`).Scan(&killed); err != nil {
			t.Fatal(err)
		}
		if killed != 1 {
			t.Fatalf("round %d: terminated %d listening backends; want 1", round, killed)
		}
		w.ExpectAll(t, 5*time.Second)
		if err := s.SetUserDisabled(ctx, "alice", round%2 == 0); err != nil {
			t.Fatal(err)
		}
		w.Expect(t, store.Change{Kind: store.ChangeUser, ID: "alice"}, storetest.ChangeDeadline)
	}
	if err := w.Stop(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Watch after cancel = %v; want context.Canceled", err)
	}
}

func BenchmarkEnqueue(b *testing.B) {
	b.Run("machines=1", func(b *testing.B) { storetest.BenchEnqueue(b, newDB(b), 1) })
	b.Run("machines=1000", func(b *testing.B) { storetest.BenchEnqueue(b, newDB(b), 1000) })
}

func BenchmarkDeliver(b *testing.B) {
	storetest.BenchDeliver(b, newDB(b))
}

func BenchmarkTokenByHash(b *testing.B) {
	storetest.BenchTokenByHash(b, newDB(b))
}
