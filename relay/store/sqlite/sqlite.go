// Package sqlite implements store.Store on SQLite (modernc.org/sqlite, pure
// Go) in WAL mode, for a relay that runs as a single process.
//
// Writes go through one connection; Enqueue calls are group-committed by a
// writer goroutine, many per transaction (commit.go). Reads use a pool of
// read-only connections, which WAL lets run beside the writer.
//
// Identity changes reach the watchers of every process sharing the file
// through the identity_changes table, which Watch polls (watch.go).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/internal/groupcommit"
	"github.com/betcode-dev/betcode/relay/store/internal/rules"
	"github.com/betcode-dev/betcode/relay/store/internal/watchgroup"
)

var _ store.Store = (*Store)(nil)

// Defaults for zero Options fields.
const (
	DefaultMaxBatch     = 1000
	DefaultCloseTimeout = 10 * time.Second
)

// Options configures a Store. The zero value is usable.
type Options struct {
	// MaxBatch caps the Enqueue calls committed in one transaction.
	MaxBatch int
	// Linger, if positive, is how long the writer waits for one more
	// Enqueue before it commits a batch, after a batch of more than one (a
	// lone caller never waits); capped at 4*Linger per batch. The default,
	// 0, commits what is queued.
	Linger time.Duration
	// Synchronous is the PRAGMA synchronous level: "FULL" (default) makes
	// every acknowledged Enqueue survive power loss; "NORMAL" only a crash
	// of the process.
	Synchronous string
	// CloseTimeout bounds how long Close waits for queued Enqueues.
	CloseTimeout time.Duration
	// Logger receives batch failures; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Validate reports unusable options.
func (o Options) Validate() error {
	switch {
	case o.MaxBatch < 0 || o.CloseTimeout < 0:
		return fmt.Errorf("negative option in %+v", o)
	case o.Synchronous != "" && o.Synchronous != "FULL" && o.Synchronous != "NORMAL":
		return fmt.Errorf("synchronous %q: want FULL or NORMAL", o.Synchronous)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.Synchronous == "" {
		o.Synchronous = "FULL"
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

// Store is the SQLite store.
type Store struct {
	opt    Options
	wdb    *sql.DB   // one connection: every write
	rdb    *sql.DB   // read-only pool
	insert *sql.Stmt // insertSQL on wdb
	q      *groupcommit.Queue[rules.Item, enqueued]

	tokenByHash *sql.Stmt // tokenByHashSQL on rdb

	watchers *watchgroup.Group // running Watch calls
	changed  *signal           // broadcast when this Store commits a change
	pruned   atomic.Int64      // unix nanos of the last identity_changes prune

	closed atomic.Bool
}

// enqueued is the result of one Enqueue.
type enqueued struct {
	id  int64
	dup bool
}

// Open opens (creating the directory and file if needed) the store at path,
// applies pending migrations and starts the Enqueue writer. The returned
// Store must be closed.
func Open(ctx context.Context, path string, opt Options) (*Store, error) {
	if err := opt.Validate(); err != nil {
		return nil, fmt.Errorf("open sqlite store %q: %w", path, err)
	}
	opt = opt.withDefaults()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open sqlite store %q: %w", path, err)
	}
	s := &Store{opt: opt, watchers: watchgroup.New(), changed: newSignal()}
	if err := s.openDBs(ctx, path); err != nil {
		return nil, fmt.Errorf("open sqlite store %q: %w", path, err)
	}
	s.q = groupcommit.New(s.commit, groupcommit.Options{MaxBatch: opt.MaxBatch, Linger: max(opt.Linger, 0)})
	return s, nil
}

func (s *Store) openDBs(ctx context.Context, path string) (err error) {
	defer func() {
		if err != nil {
			err = errors.Join(err, s.closeDBs())
		}
	}()
	// busy_timeout covers other processes (the sqlite3 shell); in this
	// process writes are serialised by wdb's single connection.
	// _txlock=immediate takes the write lock at BEGIN, so a transaction
	// never fails half way on lock upgrade.
	wq := url.Values{}
	wq.Add("_pragma", "busy_timeout(5000)")
	wq.Add("_pragma", "journal_mode(WAL)")
	wq.Add("_pragma", "synchronous("+s.opt.Synchronous+")")
	wq.Set("_txlock", "immediate")
	if s.wdb, err = sql.Open("sqlite", "file:"+path+"?"+wq.Encode()); err != nil {
		return fmt.Errorf("open write connection: %w", err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	if err := migrate(ctx, s.wdb); err != nil {
		return err
	}
	if s.insert, err = s.wdb.PrepareContext(ctx, insertSQL); err != nil {
		return fmt.Errorf("prepare insert: %w", err)
	}
	rq := url.Values{}
	rq.Add("_pragma", "busy_timeout(5000)")
	rq.Add("_pragma", "query_only(1)")
	if s.rdb, err = sql.Open("sqlite", "file:"+path+"?"+rq.Encode()); err != nil {
		return fmt.Errorf("open read pool: %w", err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	s.rdb.SetMaxOpenConns(n)
	s.rdb.SetMaxIdleConns(n)
	if s.tokenByHash, err = s.rdb.PrepareContext(ctx, tokenByHashSQL); err != nil {
		return fmt.Errorf("prepare token lookup: %w", err)
	}
	return nil
}

func (s *Store) closeDBs() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.insert, s.tokenByHash} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	for _, db := range []*sql.DB{s.rdb, s.wdb} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	return errors.Join(errs...)
}

// Close ends every Watch call, stops taking Enqueues, commits those queued
// (for at most CloseTimeout) and closes the database. It is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.watchers.Close()
	s.q.Close(s.opt.CloseTimeout)
	if _, err := s.wdb.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		s.opt.Logger.Warn("sqlite store: checkpoint on close", "err", err)
	}
	if err := s.closeDBs(); err != nil {
		return fmt.Errorf("close sqlite store: %w", err)
	}
	return nil
}

// live returns store.ErrClosed after Close.
func (s *Store) live() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// unixNano encodes t for an integer time column; the zero time is 0.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromUnixNano decodes an integer time column.
func fromUnixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
