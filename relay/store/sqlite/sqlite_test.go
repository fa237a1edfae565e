package sqlite_test

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	"github.com/betcode-dev/betcode/relay/store/storetest"
)

// newDB gives each test its own file.
func newDB(tb testing.TB) storetest.Open {
	path := filepath.Join(tb.TempDir(), "relay.db")
	return func(tb testing.TB) store.Store {
		s, err := sqlite.Open(tb.Context(), path, sqlite.Options{Logger: slog.New(slog.NewTextHandler(tbWriter{tb}, nil))})
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

// TestWatchFromAnotherProcess writes identity_changes directly, as another
// process sharing the file does, including a gap in the ids (rows pruned
// before the watcher read them), which must be reported as ChangeAll.
func TestWatchFromAnotherProcess(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "relay.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := s.SetUserDisabled(ctx, "nobody", true); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetUserDisabled(nobody) = %v", err)
	}
	if err := s.RevokeMachine(ctx, "m0", time.Time{}); err != nil { // change 1, before Watch
		t.Fatal(err)
	}
	w := storetest.StartWatch(t, s)
	w.ExpectAll(t, 5*time.Second)
	insert := func(id int, kind, ref string) {
		t.Helper()
		if _, err := raw.ExecContext(ctx, `INSERT INTO identity_changes (id, kind, ref, at) VALUES (?, ?, ?, 0)`, id, kind, ref); err != nil {
			t.Fatal(err)
		}
	}
	insert(2, "token", "t1")
	w.Expect(t, store.Change{Kind: store.ChangeToken, ID: "t1"}, storetest.ChangeDeadline)
	insert(5, "user", "bob") // 3 and 4 were pruned unseen
	if c := w.Next(t, storetest.ChangeDeadline); c.Kind != store.ChangeAll {
		t.Errorf("after a gap the next change = %+v; want ChangeAll", c)
	}
	w.Expect(t, store.Change{Kind: store.ChangeUser, ID: "bob"}, storetest.ChangeDeadline)
	insert(6, "from-a-newer-binary", "x")
	if c := w.Next(t, storetest.ChangeDeadline); c.Kind != store.ChangeAll {
		t.Errorf("an unknown kind arrived as %+v; want ChangeAll", c)
	}
}

// TestPruneChanges publishes changes two hours apart on a fake clock: the
// second publish prunes the first change, which is over an hour old.
func TestPruneChanges(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "relay.db")
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	s, err := sqlite.Open(ctx, path, sqlite.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	count := func() (n int) {
		t.Helper()
		if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM identity_changes`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	steps := []struct {
		advance time.Duration
		want    int // rows after the step's change
	}{
		{0, 1},
		{time.Minute, 2},      // too soon to prune again
		{2 * time.Hour, 1},    // prunes the two old rows
		{30 * time.Minute, 2}, // nothing over an hour old
	}
	for i, st := range steps {
		now = now.Add(st.advance)
		if err := s.RevokeMachine(ctx, fmt.Sprint("m", i), time.Time{}); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != st.want {
			t.Errorf("step %d: %d change rows; want %d", i, n, st.want)
		}
	}
}
