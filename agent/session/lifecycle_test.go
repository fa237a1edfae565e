package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/eventlog"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func TestCheckName(t *testing.T) {
	tests := []struct {
		name, in, want string
		invalid        bool
	}{
		{name: "plain", in: "refactor", want: "refactor"},
		{name: "trimmed", in: "  spaced out \n", want: "spaced out"},
		{name: "empty", in: "", want: ""},
		{name: "200 runes", in: strings.Repeat("é", 200), want: strings.Repeat("é", 200)},
		{name: "201 runes", in: strings.Repeat("é", 201), invalid: true},
		{name: "not UTF-8", in: "a\xffb", invalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkName(tt.in)
			var inv *InvalidError
			if tt.invalid != errors.As(err, &inv) || (!tt.invalid && err != nil) {
				t.Fatalf("checkName(%q) error = %v, want invalid %v", tt.in, err, tt.invalid)
			}
			if got != tt.want {
				t.Errorf("checkName(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestApplyPermissionMode(t *testing.T) {
	tests := []struct {
		mode     string
		plan     bool
		metaMode string
		invalid  bool
	}{
		{mode: ""},
		{mode: "default"},
		{mode: "plan", plan: true},
		{mode: "acceptEdits", metaMode: "acceptEdits"},
		{mode: "bypassPermissions", metaMode: "bypassPermissions"},
		{mode: "auto", invalid: true},
		{mode: "Plan", invalid: true},
	}
	for _, tt := range tests {
		t.Run("mode="+tt.mode, func(t *testing.T) {
			req := CreateRequest{PermissionMode: tt.mode}
			meta := eventlog.Session{Metadata: map[string]string{}}
			err := applyPermissionMode(&req, &meta)
			if (err != nil) != tt.invalid {
				t.Fatalf("error = %v, want invalid %v", err, tt.invalid)
			}
			if req.PlanMode != tt.plan || meta.Metadata[metaPermissionMode] != tt.metaMode {
				t.Errorf("plan %v, mode %q; want %v, %q", req.PlanMode, meta.Metadata[metaPermissionMode], tt.plan, tt.metaMode)
			}
		})
	}
}

func TestFeedPublish(t *testing.T) {
	upd := func(id string) *pb.SessionUpdate { return &pb.SessionUpdate{Session: &pb.SessionSummary{Id: id}} }
	tests := []struct {
		name     string
		filter   string
		buffer   int
		dirs     []string // one update per entry, in this directory
		wantIDs  []string // what the watcher has buffered
		wantDrop bool     // the watcher was cut off
	}{
		{name: "all", buffer: 8, dirs: []string{"/a", "/b"}, wantIDs: []string{"0", "1"}},
		{name: "filter", filter: "/a", buffer: 8, dirs: []string{"/a", "/b", "/a/"}, wantIDs: []string{"0", "2"}},
		{name: "full buffer cuts", buffer: 2, dirs: []string{"/a", "/a", "/a", "/a"}, wantIDs: []string{"0", "1"}, wantDrop: true},
		{name: "filtered updates do not fill", filter: "/b", buffer: 1, dirs: []string{"/a", "/a", "/b"}, wantIDs: []string{"2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f feed
			w, err := f.add(cleanDir(tt.filter), tt.buffer)
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range tt.dirs {
				f.publish(d, upd(fmt.Sprint(i)))
			}
			var ids []string
			for len(w.ch) > 0 {
				ids = append(ids, (<-w.ch).Session.Id)
			}
			if strings.Join(ids, ",") != strings.Join(tt.wantIDs, ",") {
				t.Errorf("buffered %v, want %v", ids, tt.wantIDs)
			}
			select {
			case <-w.cut:
				var over *WatchOverflowError
				if !tt.wantDrop || !errors.As(w.cutErr, &over) || !errors.Is(w.cutErr, ErrSlowConsumer) {
					t.Errorf("cut off with %v, want drop %v", w.cutErr, tt.wantDrop)
				}
			default:
				if tt.wantDrop {
					t.Error("not cut off")
				}
			}
			f.remove(w)
			if f.active() {
				t.Error("feed active without watchers")
			}
		})
	}
	t.Run("closed", func(t *testing.T) {
		var f feed
		w, _ := f.add("", 1)
		f.close(ErrClosed)
		<-w.cut
		if !errors.Is(w.cutErr, ErrClosed) {
			t.Errorf("watcher ended with %v, want ErrClosed", w.cutErr)
		}
		if _, err := f.add("", 1); !errors.Is(err, ErrClosed) {
			t.Errorf("add after close = %v, want ErrClosed", err)
		}
	})
}

// A watcher that stops reading is cut off while sessions and a healthy
// watcher go on.
func TestWatchCutsOffASlowWatcher(t *testing.T) {
	m := newManager(t, Config{DefaultDir: t.TempDir(), WatchBuffer: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := m.Create(ctx, CreateRequest{Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	stalled := make(chan struct{})
	var once sync.Once
	slowErr := make(chan error, 1)
	slowReady := make(chan struct{})
	go func() {
		slowErr <- m.Watch(ctx, WatchOptions{OnCut: func(error) { once.Do(func() { close(stalled) }) }}, func(u *pb.SessionUpdate) error {
			if u.SnapshotDone {
				close(slowReady)
				<-stalled // never reads again until cut
			}
			return nil
		})
	}()
	const renames = 20
	got := make(chan *pb.SessionUpdate, renames+2)
	healthyErr := make(chan error, 1)
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	go func() {
		healthyErr <- m.Watch(hctx, WatchOptions{}, func(u *pb.SessionUpdate) error {
			got <- u
			return nil
		})
	}()
	if u := <-got; u.Session.GetId() != s.ID() {
		t.Fatalf("healthy watcher's snapshot = %v", u)
	}
	if u := <-got; !u.SnapshotDone {
		t.Fatalf("healthy watcher's second update = %v, want the end of the snapshot", u)
	}
	<-slowReady
	for i := range renames {
		if _, err := s.Rename(ctx, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
		// Wait for the healthy watcher (not the slow one), so that only
		// the slow one's buffer fills.
		if u := <-got; u.Session.GetName() != fmt.Sprint(i) {
			t.Fatalf("healthy watcher got %v, want rename %d", u, i)
		}
	}
	var over *WatchOverflowError
	if err := <-slowErr; !errors.As(err, &over) || over.Buffer != 4 {
		t.Fatalf("slow watcher ended with %v, want WatchOverflowError{4}", err)
	}
	hcancel()
	if err := <-healthyErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("healthy watcher ended with %v", err)
	}
	if m.feed.active() {
		t.Error("watchers are still registered after their Watch returned")
	}
}

// Concurrent Starts with one idempotency key create one session and run
// one first turn.
func TestStartIsIdempotent(t *testing.T) {
	m := newManager(t, Config{DefaultDir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const calls = 8
	type result struct {
		s   *Session
		dup bool
		err error
	}
	results := make(chan result, calls)
	var wg sync.WaitGroup
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, dup, err := m.Start(ctx, StartRequest{Text: "hello", IdempotencyKey: "k"})
			results <- result{s, dup, err}
		}()
	}
	wg.Wait()
	close(results)
	var first *Session
	fresh := 0
	for r := range results {
		if r.err != nil {
			t.Fatal(r.err)
		}
		if first == nil {
			first = r.s
		}
		if r.s != first {
			t.Fatalf("Start gave sessions %s and %s for one key", first.ID(), r.s.ID())
		}
		if !r.dup {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d Starts created a session, want 1", fresh)
	}
	if err := first.Stream(ctx, StreamOptions{UntilIdle: true}, func(*pb.AgentEvent) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := first.Meta().MessageCount; got != 2 { // the prompt and the answer
		t.Errorf("message count %d: the first turn ran more than once", got)
	}
	list, total, err := m.Summaries(ctx, eventlog.SessionFilter{})
	if err != nil || total != 1 || list[0].LastStopReason == "" {
		t.Fatalf("Summaries = %v, %d, %v; want one session with its stop reason", list, total, err)
	}
}

// A Start whose first turn cannot run leaves no session behind.
func TestStartThatCannotRunLeavesNothing(t *testing.T) {
	m := newManager(t, Config{DefaultDir: t.TempDir(), MaxProcesses: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	busy, _, err := m.Start(ctx, StartRequest{Text: "HANG"})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = m.Start(ctx, StartRequest{Text: "hello", IdempotencyKey: "k"})
	var pool *PoolExhaustedError
	if !errors.As(err, &pool) {
		t.Fatalf("Start with the pool full = %v, want PoolExhaustedError", err)
	}
	if _, total, err := m.Summaries(ctx, eventlog.SessionFilter{}); err != nil || total != 1 {
		t.Fatalf("sessions after the failed Start: %d, %v; want only the busy one", total, err)
	}
	if _, err := m.Delete(ctx, busy.ID()); err != nil {
		t.Fatal(err)
	}
	// The key did not stick to the discarded session.
	s, dup, err := m.Start(ctx, StartRequest{Text: "hello", IdempotencyKey: "k"})
	if err != nil || dup {
		t.Fatalf("Start again = %v, %v; want a new session", dup, err)
	}
	if err := s.Stream(ctx, StreamOptions{UntilIdle: true}, func(*pb.AgentEvent) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestDeleteRunningSession(t *testing.T) {
	m := newManager(t, Config{DefaultDir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, _, err := m.Start(ctx, StartRequest{Text: "HANG"})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan struct{})
	var once sync.Once
	streamErr := make(chan error, 1)
	go func() {
		streamErr <- s.Stream(ctx, StreamOptions{}, func(ev *pb.AgentEvent) error {
			if ev.GetTextDelta() != nil {
				once.Do(func() { close(seen) })
			}
			return nil
		})
	}()
	<-seen
	watchErr := make(chan error, 1)
	deleted := make(chan *pb.SessionUpdate, 1)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	snapped := make(chan struct{})
	go func() {
		watchErr <- m.Watch(wctx, WatchOptions{}, func(u *pb.SessionUpdate) error {
			if u.SnapshotDone {
				close(snapped)
			}
			if u.Deleted {
				deleted <- u
			}
			return nil
		})
	}()
	<-snapped
	was, err := m.Delete(ctx, s.ID())
	if err != nil || !was {
		t.Fatalf("Delete = %v, %v; want a running turn stopped", was, err)
	}
	if err := <-streamErr; !errors.Is(err, ErrNotFound) {
		t.Errorf("the session's stream ended with %v, want ErrNotFound", err)
	}
	if u := <-deleted; u.Session.GetId() != s.ID() {
		t.Errorf("deleted update = %v", u)
	}
	if n := m.RunningProcesses(); n != 0 {
		t.Errorf("%d CLIs run after the delete", n)
	}
	for name, err := range map[string]error{
		"Get":    func() error { _, err := m.Get(ctx, s.ID()); return err }(),
		"Delete": func() error { _, err := m.Delete(ctx, s.ID()); return err }(),
		"Rename": func() error { _, err := s.Rename(ctx, "x"); return err }(),
		"Send":   s.SendUser(ctx, "hello", nil),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s after the delete = %v, want ErrNotFound", name, err)
		}
	}
	if n, err := m.Log().Count(ctx, s.ID()); err != nil || n != 0 {
		t.Errorf("%d events left, %v", n, err)
	}
	wcancel()
	<-watchErr
}
