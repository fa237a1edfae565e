// Package eventlog is the agent's durable, append-only log of session events,
// stored in SQLite through the pure-Go driver modernc.org/sqlite.
//
// Every AgentEvent a session produces gets a per-session sequence number and
// is written here before any client sees it, so a client that drops, or a
// daemon that crashes, can replay with Since(session, lastSeenSeq).
//
// # Writing
//
// Append only enqueues. A single writer goroutine owns the write connection:
// it takes the first queued event, drains whatever else is already queued (up
// to Options.MaxBatch, and for no longer than Options.MaxDelay), inserts the
// batch in one transaction with a prepared INSERT, and after COMMIT returns
// calls Options.OnCommit with the batch. The writer never waits for more
// events once the queue is empty: the time one commit takes (its fsync) is
// what lets the next batch accumulate, so batches grow with load while a
// lone event is committed at once. Callers that must know an event is on
// disk (the session layer, before fanning an event out) use OnCommit or
// Flush.
//
// A failed write is sticky: it is logged, the batch is dropped without
// calling OnCommit, and every later Append, Flush and Close returns an error
// wrapping ErrWrite.
//
// # Durability
//
// The database runs in WAL mode with synchronous=FULL: COMMIT returns only
// after the WAL has been fsynced, so an event handed to OnCommit survives a
// process crash and a power loss. (synchronous=NORMAL would skip that fsync
// and sync only at checkpoints; it survives a process crash but may lose the
// last transactions on power loss. FULL met the throughput target in
// BenchmarkAppend, so the log uses FULL; see docs/benchmarks.md.)
//
// # Reading
//
// Reads (Since, LastSeq, Count, GetSession, ListSessions, GetKV) go through a
// separate pool of read-only connections; WAL lets them run concurrently with
// the writer and see only committed data.
//
// Sessions' metadata rows and the per-session key/value table are written
// synchronously (they change rarely) over the same write connection.
package eventlog
