package eventlog

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// openTest opens a log in a fresh directory and closes it at cleanup.
func openTest(t testing.TB, opt Options) (*Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sub", "events.db")
	return openAt(t, path, opt), path
}

func openAt(t testing.TB, path string, opt Options) *Log {
	t.Helper()
	if opt.Logger == nil {
		opt.Logger = testLogger(t)
	}
	l, err := Open(t.Context(), path, opt)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil && !errors.Is(err, ErrWrite) {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

func ev(session string, seq uint64, kind string) Event {
	return Event{
		SessionID: session,
		Seq:       seq,
		Time:      time.Unix(1700000000, int64(seq)),
		Kind:      kind,
		Payload:   []byte(fmt.Sprintf("%s-%d", session, seq)),
	}
}

func appendAll(t testing.TB, l *Log, evs ...Event) {
	t.Helper()
	for _, e := range evs {
		if err := l.Append(t.Context(), e); err != nil {
			t.Fatalf("Append %s/%d: %v", e.SessionID, e.Seq, err)
		}
	}
}

// collect reads Since into a slice, copying payloads.
func since(t testing.TB, l *Log, session string, after uint64) []Event {
	t.Helper()
	var out []Event
	err := l.Since(t.Context(), session, after, func(e Event) error {
		e.Payload = bytes.Clone(e.Payload)
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatalf("Since(%s, %d): %v", session, after, err)
	}
	return out
}

func seqs(evs []Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opt     Options
		wantErr bool
	}{
		{"zero", Options{}, false},
		{"max delay at limit", Options{MaxDelay: 5 * time.Millisecond}, false},
		{"max delay over limit", Options{MaxDelay: 6 * time.Millisecond}, true},
		{"negative batch", Options{MaxBatch: -1}, true},
		{"negative delay", Options{MaxDelay: -1}, true},
		{"negative queue", Options{QueueSize: -1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.opt.Validate(); (err != nil) != tt.wantErr {
				t.Errorf("Validate() = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestAppendSince(t *testing.T) {
	l, _ := openTest(t, Options{})
	var evs []Event
	for i := uint64(1); i <= 100; i++ {
		evs = append(evs, ev("a", i, "text_delta"), ev("b", i*2, "tool"))
	}
	appendAll(t, l, evs...)
	if err := l.Flush(t.Context()); err != nil {
		t.Fatalf("Flush: %v", err)
	}

	tests := []struct {
		name    string
		session string
		after   uint64
		want    []uint64
	}{
		{"all", "a", 0, seqRange(1, 100)},
		{"from middle", "a", 57, seqRange(58, 100)},
		{"at end", "a", 100, nil},
		{"past end", "a", 1000, nil},
		{"other session, sparse seqs", "b", 150, []uint64{152, 154, 156, 158, 160, 162, 164, 166, 168, 170, 172, 174, 176, 178, 180, 182, 184, 186, 188, 190, 192, 194, 196, 198, 200}},
		{"unknown session", "c", 0, nil},
		{"huge after", "a", ^uint64(0), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := since(t, l, tt.session, tt.after)
			if !slices.Equal(seqs(got), tt.want) {
				t.Fatalf("seqs = %v, want %v", seqs(got), tt.want)
			}
			for _, e := range got {
				want := ev(tt.session, e.Seq, e.Kind)
				if e.SessionID != tt.session || !e.Time.Equal(want.Time) || !bytes.Equal(e.Payload, want.Payload) {
					t.Errorf("event %d = %+v, want %+v", e.Seq, e, want)
				}
			}
		})
	}

	t.Run("fn error stops", func(t *testing.T) {
		stop := errors.New("stop")
		n := 0
		err := l.Since(t.Context(), "a", 0, func(Event) error {
			n++
			if n == 3 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || n != 3 {
			t.Fatalf("Since = %v after %d events, want stop after 3", err, n)
		}
	})

	t.Run("zero time and empty payload", func(t *testing.T) {
		appendAll(t, l, Event{SessionID: "z", Seq: 1, Kind: "k"})
		if err := l.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		got := since(t, l, "z", 0)
		if len(got) != 1 || !got[0].Time.IsZero() || len(got[0].Payload) != 0 || got[0].Kind != "k" {
			t.Fatalf("got %+v", got)
		}
	})
}

func TestSequenceValidation(t *testing.T) {
	l, path := openTest(t, Options{})
	appendAll(t, l, ev("s", 1, "k"), ev("s", 2, "k"), ev("s", 5, "k"), ev("t", 3, "k"))

	tests := []struct {
		name    string
		ev      Event
		wantErr error
	}{
		{"equal", ev("s", 5, "k"), ErrSequence},
		{"lower", ev("s", 4, "k"), ErrSequence},
		{"zero on new session", ev("u", 0, "k"), ErrSequence},
		{"gap is fine", ev("s", 9, "k"), nil},
		{"after gap", ev("s", 10, "k"), nil},
		{"independent session", ev("t", 4, "k"), nil},
		{"new session", ev("v", 1, "k"), nil},
		{"empty session", ev("", 1, "k"), errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := l.Append(t.Context(), tt.ev)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("Append = %v, want nil", err)
			case tt.wantErr == errAny && err == nil:
				t.Fatal("Append = nil, want error")
			case tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
				t.Fatalf("Append = %v, want %v", err, tt.wantErr)
			}
		})
	}

	// After reopening, the committed maximum is enforced.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openAt(t, path, Options{})
	if err := l2.Append(t.Context(), ev("s", 10, "k")); !errors.Is(err, ErrSequence) {
		t.Fatalf("Append after reopen = %v, want ErrSequence", err)
	}
	if err := l2.Append(t.Context(), ev("s", 11, "k")); err != nil {
		t.Fatalf("Append after reopen: %v", err)
	}
}

var errAny = errors.New("any error")

func TestFlushAndOnCommit(t *testing.T) {
	var (
		mu      sync.Mutex
		batches [][]uint64
	)
	onCommit := func(evs []Event) {
		mu.Lock()
		defer mu.Unlock()
		batches = append(batches, seqs(evs)) // copy: evs is reused
	}
	const maxBatch = 7
	l, _ := openTest(t, Options{MaxBatch: maxBatch, OnCommit: onCommit})

	const n = 500
	for i := uint64(1); i <= n; i++ {
		appendAll(t, l, ev("s", i, "k"))
		if i%100 == 0 {
			if err := l.Flush(t.Context()); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			// Flush returns only after OnCommit saw everything before it.
			mu.Lock()
			var got []uint64
			for _, b := range batches {
				got = append(got, b...)
			}
			mu.Unlock()
			if !slices.Equal(got, seqRange(1, i)) {
				t.Fatalf("after Flush at %d OnCommit saw %v", i, got)
			}
			// And Since sees it too.
			if c, err := l.Count(t.Context(), "s"); err != nil || c != int(i) {
				t.Fatalf("Count = %d, %v; want %d", c, err, i)
			}
			if last, err := l.LastSeq(t.Context(), "s"); err != nil || last != i {
				t.Fatalf("LastSeq = %d, %v; want %d", last, err, i)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, b := range batches {
		if len(b) == 0 || len(b) > maxBatch {
			t.Errorf("batch of %d events, want 1..%d", len(b), maxBatch)
		}
	}
}

func TestBatching(t *testing.T) {
	// Fill the queue while the writer is stuck in OnCommit, then release
	// it: the backlog must be committed in MaxBatch-sized batches.
	release := make(chan struct{})
	var (
		mu    sync.Mutex
		sizes []int
	)
	first := true
	onCommit := func(evs []Event) {
		if first {
			first = false
			<-release
		}
		mu.Lock()
		sizes = append(sizes, len(evs))
		mu.Unlock()
	}
	l, _ := openTest(t, Options{MaxBatch: 50, QueueSize: 1000, OnCommit: onCommit})
	appendAll(t, l, ev("s", 1, "k"))
	for i := uint64(2); i <= 201; i++ {
		appendAll(t, l, ev("s", i, "k"))
	}
	close(release)
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// The first batch may be 1..50 events depending on when the writer
	// took it; the 200 queued behind it go in full batches.
	total := 0
	for _, s := range sizes {
		total += s
	}
	if total != 201 {
		t.Fatalf("committed %d events, want 201 (batches %v)", total, sizes)
	}
	if len(sizes) > 6 {
		t.Fatalf("batches %v: want the backlog in batches of 50", sizes)
	}
}

func TestAppendBlocksWhenFull(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	var once sync.Once
	l, _ := openTest(t, Options{QueueSize: 2, OnCommit: func([]Event) {
		once.Do(func() { close(entered); <-release })
	}})
	appendAll(t, l, ev("s", 1, "k"))
	<-entered // the writer holds batch 1 and is blocked
	appendAll(t, l, ev("s", 2, "k"), ev("s", 3, "k"))

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Append(ctx, ev("s", 4, "k")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append on full queue with canceled ctx = %v, want context.Canceled", err)
	}
	if err := l.Flush(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Flush with canceled ctx = %v, want context.Canceled", err)
	}
	close(release)
	// The canceled seq 4 was not queued, so it may be appended again.
	appendAll(t, l, ev("s", 4, "k"))
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := seqs(since(t, l, "s", 0)); !slices.Equal(got, seqRange(1, 4)) {
		t.Fatalf("seqs = %v", got)
	}
}

func TestCloseDrainsQueue(t *testing.T) {
	var committed []uint64 // written by the writer only; read after Close
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	l, err := Open(t.Context(), path, Options{Logger: testLogger(t), OnCommit: func(evs []Event) {
		committed = append(committed, seqs(evs)...)
	}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	for i := uint64(1); i <= n; i++ {
		appendAll(t, l, ev("s", i, "k"))
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if !slices.Equal(committed, seqRange(1, n)) {
		t.Fatalf("OnCommit saw %d events, want %d in order", len(committed), n)
	}
	select {
	case <-l.writerDone:
	default:
		t.Fatal("writer goroutine still running after Close")
	}
	if err := l.Append(t.Context(), ev("s", n+1, "k")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	if err := l.Flush(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Flush after Close = %v, want ErrClosed", err)
	}

	// Reopen: everything is there.
	l2 := openAt(t, path, Options{})
	if got := seqs(since(t, l2, "s", 0)); !slices.Equal(got, seqRange(1, n)) {
		t.Fatalf("after reopen: %d events", len(got))
	}
}

func TestWriteFailure(t *testing.T) {
	var (
		mu        sync.Mutex
		committed []uint64
	)
	l, path := openTest(t, Options{OnCommit: func(evs []Event) {
		mu.Lock()
		committed = append(committed, seqs(evs)...)
		mu.Unlock()
	}})
	appendAll(t, l, ev("s", 1, "k"))
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}

	// A trigger, installed over another connection, makes inserts of kind
	// "boom" fail the way a full disk or I/O error would.
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Exec(`CREATE TRIGGER boom BEFORE INSERT ON events WHEN NEW.kind = 'boom'
		BEGIN SELECT RAISE(ABORT, 'injected failure'); END`); err != nil {
		t.Fatal(err)
	}

	appendAll(t, l, ev("s", 2, "k"), ev("s", 3, "boom"), ev("s", 4, "k"))
	if err := l.Flush(t.Context()); !errors.Is(err, ErrWrite) {
		t.Fatalf("Flush after failed write = %v, want ErrWrite", err)
	}
	if err := l.Append(t.Context(), ev("s", 5, "k")); !errors.Is(err, ErrWrite) {
		t.Fatalf("Append after failed write = %v, want ErrWrite", err)
	}
	if err := l.Flush(t.Context()); !errors.Is(err, ErrWrite) {
		t.Fatalf("second Flush = %v, want ErrWrite", err)
	}
	mu.Lock()
	got := slices.Clone(committed)
	mu.Unlock()
	// Seq 2 may have been committed in its own batch before 3; 3 and 4 never.
	if !slices.Equal(got, []uint64{1}) && !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("OnCommit saw %v, want [1] or [1 2]", got)
	}
	if stored := seqs(since(t, l, "s", 0)); !slices.Equal(stored, got) {
		t.Fatalf("stored %v, but OnCommit saw %v", stored, got)
	}
	if err := l.Close(); !errors.Is(err, ErrWrite) {
		t.Fatalf("Close = %v, want ErrWrite", err)
	}
}

func TestConcurrentReadersWhileWriting(t *testing.T) {
	l, _ := openTest(t, Options{})
	const n = 3000
	ctx := t.Context()
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := range 3 {
		wg.Go(func() {
			var last uint64
			for {
				select {
				case <-done:
					return
				default:
				}
				// Every snapshot is a contiguous prefix that never shrinks.
				var want uint64 = 1
				err := l.Since(ctx, "s", 0, func(e Event) error {
					if e.Seq != want {
						return fmt.Errorf("reader %d: seq %d, want %d", r, e.Seq, want)
					}
					if string(e.Payload) != fmt.Sprintf("s-%d", e.Seq) {
						return fmt.Errorf("reader %d: payload %q", r, e.Payload)
					}
					want++
					return nil
				})
				if err == nil && want-1 < last {
					err = fmt.Errorf("reader %d: saw %d events after %d", r, want-1, last)
				}
				if err != nil {
					errs <- err
					return
				}
				last = want - 1
			}
		})
	}
	for i := uint64(1); i <= n; i++ {
		appendAll(t, l, ev("s", i, "k"))
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if c, err := l.Count(ctx, "s"); err != nil || c != n {
		t.Fatalf("Count = %d, %v", c, err)
	}
}

func TestConcurrentAppenders(t *testing.T) {
	var (
		mu   sync.Mutex
		last = map[string]uint64{}
		bad  []string
	)
	l, _ := openTest(t, Options{MaxBatch: 16, OnCommit: func(evs []Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range evs {
			if e.Seq != last[e.SessionID]+1 {
				bad = append(bad, fmt.Sprintf("%s: %d after %d", e.SessionID, e.Seq, last[e.SessionID]))
			}
			last[e.SessionID] = e.Seq
		}
	}})
	var wg sync.WaitGroup
	const perSession = 500
	for s := range 4 {
		wg.Go(func() {
			id := fmt.Sprintf("s%d", s)
			for i := uint64(1); i <= perSession; i++ {
				if err := l.Append(t.Context(), ev(id, i, "k")); err != nil {
					t.Errorf("Append: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("OnCommit order: %v", bad[:min(5, len(bad))])
	}
	for s := range 4 {
		if got := last[fmt.Sprintf("s%d", s)]; got != perSession {
			t.Errorf("session s%d: last committed %d", s, got)
		}
	}
}

func TestDeleteBefore(t *testing.T) {
	kinds := []string{"text_delta", "text_delta", "user_message", "tool_result", "text_delta", "turn_end"}
	tests := []struct {
		name      string
		before    uint64
		keep      []string
		wantGone  int
		wantSeqs  []uint64
		otherKept bool
	}{
		{"nothing before 1", 1, nil, 0, seqRange(1, 6), true},
		{"all before 4", 4, nil, 3, seqRange(4, 6), true},
		{"keep user messages", 5, []string{"user_message"}, 3, []uint64{3, 5, 6}, true},
		{"keep two kinds", 7, []string{"user_message", "turn_end"}, 4, []uint64{3, 6}, true},
		{"everything", 100, nil, 6, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := openTest(t, Options{})
			for i, k := range kinds {
				appendAll(t, l, ev("s", uint64(i+1), k), ev("other", uint64(i+1), k))
			}
			if err := l.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			n, err := l.DeleteBefore(t.Context(), "s", tt.before, tt.keep...)
			if err != nil || n != tt.wantGone {
				t.Fatalf("DeleteBefore = %d, %v; want %d", n, err, tt.wantGone)
			}
			if got := seqs(since(t, l, "s", 0)); !slices.Equal(got, tt.wantSeqs) {
				t.Fatalf("left %v, want %v", got, tt.wantSeqs)
			}
			if c, _ := l.Count(t.Context(), "other"); c != len(kinds) {
				t.Fatalf("other session has %d events", c)
			}
			// Appending continues after the old maximum.
			if err := l.Append(t.Context(), ev("s", 6, "k")); !errors.Is(err, ErrSequence) {
				t.Fatalf("Append of old seq after delete = %v, want ErrSequence", err)
			}
		})
	}
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	for round := range 3 {
		l, err := Open(t.Context(), path, Options{Logger: testLogger(t)})
		if err != nil {
			t.Fatalf("round %d: Open: %v", round, err)
		}
		last, err := l.LastSeq(t.Context(), "s")
		if err != nil || last != uint64(round*10) {
			t.Fatalf("round %d: LastSeq = %d, %v", round, last, err)
		}
		for i := last + 1; i <= last+10; i++ {
			appendAll(t, l, ev("s", i, "k"))
		}
		if err := l.PutKV(t.Context(), "s", fmt.Sprintf("round/%d", round), []byte{byte(round)}); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
	}
	l := openAt(t, path, Options{})
	if got := seqs(since(t, l, "s", 0)); !slices.Equal(got, seqRange(1, 30)) {
		t.Fatalf("seqs = %v", got)
	}
	kv, err := l.GetKV(t.Context(), "s", "round/")
	if err != nil || len(kv) != 3 {
		t.Fatalf("GetKV = %v, %v", kv, err)
	}
}

func TestSchemaVersion(t *testing.T) {
	l, path := openTest(t, Options{})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil || v != len(migrations) {
		t.Fatalf("schema version = %d, %v; want %d", v, err, len(migrations))
	}
	if _, err := db.Exec(`UPDATE schema_version SET version = ?`, len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(t.Context(), path, Options{}); err == nil {
		l.Close()
		t.Fatal("Open of a newer schema succeeded")
	}
}

// SinceKinds and LatestKinds return only the events of the kinds asked
// for, oldest and newest first.
func TestKindFilters(t *testing.T) {
	l, _ := openTest(t, Options{})
	kinds := []string{"text_delta", "todo_update", "text_delta", "tool", "todo_update", "text_delta"}
	for i, k := range kinds {
		appendAll(t, l, ev("s", uint64(i+1), k), ev("other", uint64(i+1), k))
	}
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	collect := func(read func(fn func(Event) error) error) []uint64 {
		t.Helper()
		var got []Event
		if err := read(func(e Event) error { got = append(got, e); return nil }); err != nil {
			t.Fatal(err)
		}
		for _, e := range got {
			if want := ev("s", e.Seq, e.Kind); e.SessionID != "s" || e.Kind != kinds[e.Seq-1] || !bytes.Equal(e.Payload, want.Payload) {
				t.Errorf("event %+v, want %+v", e, want)
			}
		}
		return seqs(got)
	}
	for _, tt := range []struct {
		name  string
		after uint64
		kinds []string
		want  []uint64
	}{
		{"one kind", 0, []string{"todo_update"}, []uint64{2, 5}},
		{"two kinds", 0, []string{"todo_update", "tool"}, []uint64{2, 4, 5}},
		{"after", 2, []string{"todo_update", "text_delta"}, []uint64{3, 5, 6}},
		{"none asked", 0, nil, nil},
		{"unknown kind", 0, []string{"nope"}, nil},
	} {
		t.Run("SinceKinds "+tt.name, func(t *testing.T) {
			got := collect(func(fn func(Event) error) error { return l.SinceKinds(t.Context(), "s", tt.after, tt.kinds, fn) })
			if !slices.Equal(got, tt.want) {
				t.Fatalf("seqs = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("LatestKinds", func(t *testing.T) {
		got := collect(func(fn func(Event) error) error {
			return l.LatestKinds(t.Context(), "s", []string{"todo_update", "tool"}, fn)
		})
		if !slices.Equal(got, []uint64{5, 4, 2}) {
			t.Fatalf("seqs = %v, want newest first [5 4 2]", got)
		}
		stop := errors.New("stop")
		n := 0
		err := l.LatestKinds(t.Context(), "s", []string{"text_delta"}, func(e Event) error { n++; return stop })
		if !errors.Is(err, stop) || n != 1 {
			t.Fatalf("LatestKinds = %v after %d events, want stop after 1", err, n)
		}
	})
}
