package postgres_test

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

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

func BenchmarkEnqueue(b *testing.B) {
	b.Run("machines=1", func(b *testing.B) { storetest.BenchEnqueue(b, newDB(b), 1) })
	b.Run("machines=1000", func(b *testing.B) { storetest.BenchEnqueue(b, newDB(b), 1000) })
}

func BenchmarkDeliver(b *testing.B) {
	storetest.BenchDeliver(b, newDB(b))
}
