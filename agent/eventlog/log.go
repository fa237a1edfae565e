package eventlog

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
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Sentinel errors; test with errors.Is.
var (
	// ErrClosed is returned by operations on a Log after Close.
	ErrClosed = errors.New("event log closed")
	// ErrSequence is returned by Append when an event's Seq is not greater
	// than the last Seq appended for its session.
	ErrSequence = errors.New("event sequence out of order")
	// ErrWrite is returned once a batch failed to commit; the log accepts no
	// more events after that.
	ErrWrite = errors.New("event log write failed")
	// ErrNotFound is returned by GetSession for an unknown session.
	ErrNotFound = errors.New("not found")
)

// Event is one stored event of a session. Payload is opaque bytes (the
// caller stores a serialized protobuf AgentEvent); Kind is a short type tag
// (e.g. "text_delta") used for queries and compaction.
type Event struct {
	SessionID string
	Seq       uint64 // assigned by the caller, strictly increasing per session, starting at 1
	Time      time.Time
	Kind      string
	Payload   []byte
	// With, when set, is written to the session's key/value table in the
	// same transaction as the event, so that neither outlives a crash
	// without the other: an idempotency key committed with the message it
	// records.
	With *KV
	// Status, when set, becomes the status of the session's metadata row
	// (see PutSession) in the same transaction as the event: a turn's
	// start and end are exactly as durable as the events that record them,
	// so a crash right after a turn ended does not leave the session
	// "active" with its turn_complete already in the log.
	Status string
}

// KV is one entry of a session's key/value table (see PutKV).
type KV struct {
	Key   string
	Value []byte
}

// Defaults for Options fields left zero.
const (
	DefaultMaxBatch  = 1024
	DefaultMaxDelay  = 2 * time.Millisecond
	DefaultQueueSize = 8192

	// maxMaxDelay is the upper bound on Options.MaxDelay: events must reach
	// clients quickly, and they reach clients only after they are committed.
	maxMaxDelay = 5 * time.Millisecond
)

// Options configures a Log. The zero value is usable: zero fields take the
// Default* values.
type Options struct {
	// MaxBatch is the maximum number of events per transaction.
	MaxBatch int
	// MaxDelay bounds how long the writer keeps draining a continuously
	// refilled queue into one batch before committing it; it must be at most
	// 5ms. The writer never waits on an empty queue.
	MaxDelay time.Duration
	// QueueSize is the capacity of the bounded queue; Append blocks
	// (respecting its context) while the queue is full.
	QueueSize int
	// OnCommit is called by the writer goroutine, in commit order, after each
	// batch is durable. The slice is only valid during the call, and OnCommit
	// must not call Append or Flush (the writer would wait for itself). May
	// be nil.
	OnCommit func([]Event)
	// Metrics, if set, counts committed events and times commits.
	Metrics *Metrics
	// Logger receives write failures and shutdown problems; nil discards.
	Logger *slog.Logger
}

// Validate reports whether o, after defaults are applied, is usable.
func (o Options) Validate() error {
	switch {
	case o.MaxBatch < 0:
		return fmt.Errorf("max batch %d is negative", o.MaxBatch)
	case o.MaxDelay < 0:
		return fmt.Errorf("max delay %v is negative", o.MaxDelay)
	case o.MaxDelay > maxMaxDelay:
		return fmt.Errorf("max delay %v exceeds %v", o.MaxDelay, maxMaxDelay)
	case o.QueueSize < 0:
		return fmt.Errorf("queue size %d is negative", o.QueueSize)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxDelay == 0 {
		o.MaxDelay = DefaultMaxDelay
	}
	if o.QueueSize == 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// synchronous is the PRAGMA synchronous level of the write connection. A
// variable only so BenchmarkSynchronous can compare levels.
var synchronous = "FULL"

// Log is a durable per-session event log. Its methods are safe for
// concurrent use.
type Log struct {
	opt Options
	log *slog.Logger

	wdb *sql.DB // one connection: the writer goroutine, sessions, kv, compaction
	rdb *sql.DB // read-only pool

	insertStmt *sql.Stmt // on wdb
	sinceStmt  *sql.Stmt // on rdb

	// appendMu is a semaphore rather than a sync.Mutex so that Append can
	// give up waiting for it when its context ends. Holding it orders
	// sequence validation with the send to queue, and excludes Close from
	// closing queue under a sender.
	appendMu chan struct{}
	closed   bool              // guarded by appendMu
	lastSeq  map[string]uint64 // last appended seq per session; guarded by appendMu
	queue    chan item

	writerDone chan struct{}

	errMu    sync.Mutex
	writeErr error // sticky; set by the writer

	closeOnce sync.Once
	closeErr  error
}

// item is a queued event, or a flush marker when flushed is non-nil.
type item struct {
	ev      Event
	flushed chan error
}

// Open opens (creating the directory and file if needed) the event log at
// path, applies pending schema migrations and starts the writer goroutine.
// The returned Log must be closed.
func Open(ctx context.Context, path string, opt Options) (*Log, error) {
	if err := opt.Validate(); err != nil {
		return nil, fmt.Errorf("open event log %q: %w", path, err)
	}
	opt = opt.withDefaults()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open event log %q: create directory: %w", path, err)
	}

	l := &Log{
		opt:        opt,
		log:        opt.Logger,
		appendMu:   make(chan struct{}, 1),
		lastSeq:    make(map[string]uint64),
		queue:      make(chan item, opt.QueueSize),
		writerDone: make(chan struct{}),
	}
	if err := l.openDBs(ctx, path); err != nil {
		return nil, fmt.Errorf("open event log %q: %w", path, err)
	}
	go l.writer()
	return l, nil
}

func (l *Log) openDBs(ctx context.Context, path string) (err error) {
	defer func() {
		if err != nil {
			l.closeDBs()
		}
	}()
	// busy_timeout covers other processes (a second daemon, the sqlite3
	// shell); within this process writes are serialised by wdb's single
	// connection. _txlock=immediate takes the write lock at BEGIN, so a
	// transaction never fails half way on lock upgrade.
	wq := url.Values{}
	wq.Add("_pragma", "busy_timeout(5000)")
	wq.Add("_pragma", "journal_mode(WAL)")
	wq.Add("_pragma", "synchronous("+synchronous+")")
	wq.Add("_pragma", "foreign_keys(1)")
	wq.Set("_txlock", "immediate")
	if l.wdb, err = sql.Open("sqlite", "file:"+path+"?"+wq.Encode()); err != nil {
		return fmt.Errorf("open write connection: %w", err)
	}
	l.wdb.SetMaxOpenConns(1)
	l.wdb.SetMaxIdleConns(1)
	l.wdb.SetConnMaxLifetime(0)
	l.wdb.SetConnMaxIdleTime(0)
	if err := l.wdb.PingContext(ctx); err != nil {
		return fmt.Errorf("open write connection: %w", err)
	}
	if err := migrate(ctx, l.wdb); err != nil {
		return err
	}

	rq := url.Values{}
	rq.Add("_pragma", "busy_timeout(5000)")
	rq.Add("_pragma", "query_only(1)")
	if l.rdb, err = sql.Open("sqlite", "file:"+path+"?"+rq.Encode()); err != nil {
		return fmt.Errorf("open read pool: %w", err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	l.rdb.SetMaxOpenConns(n)
	l.rdb.SetMaxIdleConns(n)

	if l.insertStmt, err = l.wdb.PrepareContext(ctx,
		`INSERT INTO events (session_id, seq, ts, kind, payload) VALUES (?, ?, ?, ?, ?)`); err != nil {
		return fmt.Errorf("prepare insert: %w", err)
	}
	if l.sinceStmt, err = l.rdb.PrepareContext(ctx,
		`SELECT seq, ts, kind, payload FROM events WHERE session_id = ? AND seq > ? ORDER BY seq`); err != nil {
		return fmt.Errorf("prepare since: %w", err)
	}
	return nil
}

// closeDBs closes whatever openDBs opened and returns the first errors.
func (l *Log) closeDBs() error {
	var errs []error
	for _, s := range []*sql.Stmt{l.insertStmt, l.sinceStmt} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	if l.wdb != nil {
		// Fold the WAL back into the main file so a closed log is a single
		// file; best effort, a later open recovers from the WAL anyway.
		if _, err := l.wdb.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			l.log.Warn("eventlog: checkpoint on close", "err", err)
		}
	}
	for _, db := range []*sql.DB{l.rdb, l.wdb} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	return errors.Join(errs...)
}

// lock acquires appendMu, or returns ctx's error.
func (l *Log) lock(ctx context.Context) error {
	select {
	case l.appendMu <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Log) unlock() { <-l.appendMu }

// failure returns the sticky write error, or nil.
func (l *Log) failure() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.writeErr
}

// Append enqueues ev and returns once it is queued, not once it is
// committed (use OnCommit or Flush for that). It blocks while the queue is
// full, until ctx ends. ev.Seq must be greater than the last Seq appended
// for ev.SessionID (including events committed by earlier processes);
// otherwise the error wraps ErrSequence. Append does not retain ev.Payload
// past the commit of its batch but does not copy it either: the caller must
// not modify it until then.
func (l *Log) Append(ctx context.Context, ev Event) error {
	if ev.SessionID == "" {
		return errors.New("append event: empty session id")
	}
	if err := l.lock(ctx); err != nil {
		return fmt.Errorf("append event %s/%d: %w", ev.SessionID, ev.Seq, err)
	}
	defer l.unlock()
	if l.closed {
		return fmt.Errorf("append event %s/%d: %w", ev.SessionID, ev.Seq, ErrClosed)
	}
	if err := l.failure(); err != nil {
		return fmt.Errorf("append event %s/%d: %w", ev.SessionID, ev.Seq, err)
	}
	last, ok := l.lastSeq[ev.SessionID]
	if !ok {
		// First event of this session in this process: nothing of it is
		// queued, so the committed maximum is the appended maximum.
		var err error
		if last, err = l.LastSeq(ctx, ev.SessionID); err != nil {
			return fmt.Errorf("append event %s/%d: %w", ev.SessionID, ev.Seq, err)
		}
	}
	if ev.Seq <= last {
		l.lastSeq[ev.SessionID] = last
		return fmt.Errorf("append event %s/%d after seq %d: %w", ev.SessionID, ev.Seq, last, ErrSequence)
	}
	select {
	case l.queue <- item{ev: ev}:
		l.lastSeq[ev.SessionID] = ev.Seq
		return nil
	case <-ctx.Done():
		l.lastSeq[ev.SessionID] = last
		return fmt.Errorf("append event %s/%d: %w", ev.SessionID, ev.Seq, ctx.Err())
	}
}

// Flush waits until every event appended before the call is committed and
// OnCommit has returned for it. It returns an error wrapping ErrWrite if any
// batch failed, ErrClosed after Close, or ctx's error.
func (l *Log) Flush(ctx context.Context) error {
	done := make(chan error, 1)
	if err := l.lock(ctx); err != nil {
		return fmt.Errorf("flush event log: %w", err)
	}
	if l.closed {
		l.unlock()
		return fmt.Errorf("flush event log: %w", ErrClosed)
	}
	select {
	case l.queue <- item{flushed: done}:
		l.unlock()
	case <-ctx.Done():
		l.unlock()
		return fmt.Errorf("flush event log: %w", ctx.Err())
	}
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("flush event log: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("flush event log: %w", ctx.Err())
	}
}

// Close stops accepting events, commits everything already queued, stops
// the writer goroutine and closes the database. It returns an error wrapping
// ErrWrite if any batch failed to commit during the Log's life. Close is
// idempotent; later calls return the first call's result.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		// No context: appendMu is held only by senders the running writer
		// will unblock.
		l.appendMu <- struct{}{}
		l.closed = true
		close(l.queue)
		l.unlock()
		<-l.writerDone
		l.closeErr = errors.Join(l.failure(), l.closeDBs())
		if l.closeErr != nil {
			l.closeErr = fmt.Errorf("close event log: %w", l.closeErr)
		}
	})
	return l.closeErr
}
