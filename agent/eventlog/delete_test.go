package eventlog

import (
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	schema "github.com/betcode-dev/betcode/shared/migrate"
)

func TestDeleteSession(t *testing.T) {
	var committed []Event
	l, _ := openTest(t, Options{OnCommit: func(evs []Event) { committed = append(committed, evs...) }})
	ctx := t.Context()
	for _, id := range []string{"gone", "kept"} {
		if err := l.PutSession(ctx, Session{ID: id, Name: id}); err != nil {
			t.Fatal(err)
		}
		if err := l.PutKV(ctx, id, "grant/1", []byte("Bash")); err != nil {
			t.Fatal(err)
		}
		for seq := uint64(1); seq <= 3; seq++ {
			if err := l.Append(ctx, Event{SessionID: id, Seq: seq, Time: time.Unix(1, 0), Kind: "k"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The appended events are not committed yet: DeleteSession waits for
	// them, so none survives.
	found, err := l.DeleteSession(ctx, "gone")
	if err != nil || !found {
		t.Fatalf("DeleteSession = %v, %v", found, err)
	}
	if len(committed) != 6 {
		t.Errorf("%d events committed before the delete returned, want 6", len(committed))
	}
	tests := []struct {
		id      string
		events  int
		kv      int
		present bool
	}{
		{id: "gone", events: 0, kv: 0, present: false},
		{id: "kept", events: 3, kv: 1, present: true},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			if n, err := l.Count(ctx, tt.id); err != nil || n != tt.events {
				t.Errorf("Count = %d, %v; want %d", n, err, tt.events)
			}
			if kv, err := l.GetKV(ctx, tt.id, ""); err != nil || len(kv) != tt.kv {
				t.Errorf("GetKV = %v, %v; want %d entries", kv, err, tt.kv)
			}
			_, err := l.GetSession(ctx, tt.id)
			if tt.present != (err == nil) || (!tt.present && !errors.Is(err, ErrNotFound)) {
				t.Errorf("GetSession = %v, want present %v", err, tt.present)
			}
		})
	}
	// The id starts afresh (an adopted session can be adopted again).
	if err := l.Append(ctx, Event{SessionID: "gone", Seq: 1, Kind: "k"}); err != nil {
		t.Fatalf("Append seq 1 after the delete: %v", err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if found, err := l.DeleteSession(ctx, "never"); err != nil || found {
		t.Errorf("DeleteSession of an unknown id = %v, %v; want not found, no error", found, err)
	}
}

func TestDeleteKV(t *testing.T) {
	l, _ := openTest(t, Options{})
	ctx := t.Context()
	for _, k := range []string{"start/a", "start/b"} {
		if err := l.PutKV(ctx, "", k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"start/a", "start/missing"} {
		if err := l.DeleteKV(ctx, "", k); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := l.GetKV(ctx, "", "start/")
	if err != nil || len(kv) != 1 || kv["start/b"] == nil {
		t.Fatalf("GetKV = %v, %v; want only start/b", kv, err)
	}
}

// A log written by a version with only the first migration opens with the
// new columns empty.
func TestMigrationAddsSessionColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Apply(t.Context(), db, migrations[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO sessions (id, model) VALUES ('old', 'm')`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	l := openAt(t, path, Options{})
	s, err := l.GetSession(t.Context(), "old")
	if err != nil {
		t.Fatal(err)
	}
	if s.Model != "m" || s.Name != "" || s.CreatedBy != "" || s.LastStopReason != "" {
		t.Errorf("migrated session = %+v", s)
	}
}
