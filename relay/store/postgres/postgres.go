// Package postgres implements store.Store on PostgreSQL with pgx, for one or
// several relay replicas sharing a database.
//
// Identity changes reach every replica through LISTEN/NOTIFY (watch.go).
//
// Enqueue is group-committed: concurrent calls are queued, and a writer
// goroutine commits whatever has queued up in one transaction of one
// statement, sending the next batch while the previous one commits (see
// commit.go). Buffer caps hold across replicas
// because every transaction that changes a machine's buffer locks that
// machine's machine_buffer_usage row first.
package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/internal/groupcommit"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
	"github.com/betcode-dev/betcode/relay/store/internal/watchgroup"
)

var _ store.Store = (*Store)(nil)

// Defaults for zero Options fields.
const (
	DefaultMaxBatch     = 1000
	DefaultWriters      = 1
	DefaultDepth        = 2
	DefaultCloseTimeout = 10 * time.Second
)

// Options configures a Store. The zero value is usable.
type Options struct {
	// MaxBatch caps the Enqueue calls committed in one transaction.
	MaxBatch int
	// Writers is how many Enqueue batches may be in flight at once. Each
	// writer owns the machines that hash to it, so concurrent batches of
	// one replica never wait for each other's row locks; each holds a
	// connection while it commits. The default, 1, gives the largest
	// batches; more helps only with cores to spare.
	Writers int
	// Depth is how many batches each writer may have sent on its
	// connection and not yet seen committed. The default, 2, sends the
	// next batch while the previous one commits, so the database does not
	// wait for the writer between batches; 1 waits for each batch.
	Depth int
	// Linger, if positive, is how long a writer with no batch in flight
	// waits for one more Enqueue before it sends a batch, after a batch of
	// more than one (a lone caller never waits); capped at 4*Linger per
	// batch. The default, 0, sends what is queued; with Depth 2 the writer
	// collects the next batch while one commits anyway (docs/relay-store.md).
	Linger time.Duration
	// MaxConns overrides the pool size (pool_max_conns in the URL, else
	// pgxpool's default); it is raised to at least Writers+2.
	MaxConns int32
	// CloseTimeout bounds how long Close waits for queued Enqueues.
	CloseTimeout time.Duration
	// Logger receives batch failures; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Validate reports unusable options.
func (o Options) Validate() error {
	if o.MaxBatch < 0 || o.Writers < 0 || o.Depth < 0 || o.MaxConns < 0 || o.CloseTimeout < 0 {
		return fmt.Errorf("negative option in %+v", o)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.Writers == 0 {
		o.Writers = DefaultWriters
	}
	if o.Depth == 0 {
		o.Depth = DefaultDepth
	}
	if o.CloseTimeout == 0 {
		o.CloseTimeout = DefaultCloseTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Store is the PostgreSQL store.
type Store struct {
	opt      Options
	pool     *pgxpool.Pool
	qs       []*groupcommit.Queue[rules.Item, enqueued] // one per writer
	watchers *watchgroup.Group                          // running Watch calls

	closed atomic.Bool
}

// enqueued is the result of one Enqueue.
type enqueued struct {
	id  int64
	dup bool
}

// Open connects to databaseURL, applies pending migrations and starts the
// Enqueue writers. The returned Store must be closed.
func Open(ctx context.Context, databaseURL string, opt Options) (*Store, error) {
	if err := opt.Validate(); err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	opt = opt.withDefaults()
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if opt.MaxConns > 0 {
		cfg.MaxConns = opt.MaxConns
	}
	cfg.MaxConns = max(cfg.MaxConns, int32(opt.Writers)+2)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	s := &Store{opt: opt, pool: pool, watchers: watchgroup.New()}
	for range opt.Writers {
		w := &writer{s: s}
		s.qs = append(s.qs, groupcommit.NewPipelined(w.send, groupcommit.Options{
			MaxBatch: opt.MaxBatch, Linger: max(opt.Linger, 0), Depth: opt.Depth,
		}))
	}
	return s, nil
}

// Close ends every Watch call, stops taking Enqueues, commits those queued
// (for at most CloseTimeout) and closes the pool. It is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.watchers.Close()
	var wg sync.WaitGroup
	for _, q := range s.qs {
		wg.Go(func() { q.Close(s.opt.CloseTimeout) })
	}
	wg.Wait()
	s.pool.Close()
	return nil
}

// queue returns the writer queue that owns machineID.
func (s *Store) queue(machineID string) *groupcommit.Queue[rules.Item, enqueued] {
	h := fnv.New32a()
	h.Write([]byte(machineID))
	return s.qs[h.Sum32()%uint32(len(s.qs))]
}

// live returns store.ErrClosed after Close.
func (s *Store) live() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}
