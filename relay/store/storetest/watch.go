package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
)

// ChangeDeadline is how soon a committed change must reach a watcher
// (store.Identity.Watch promises a second).
const ChangeDeadline = time.Second

// startDeadline bounds how long Watch may take to subscribe, and to return
// once its context ends.
const startDeadline = 5 * time.Second

// Watcher is a running Watch call, for tests: its changes arrive on a
// channel. Tests of a backend's own reconnection use it too.
type Watcher struct {
	changes chan store.Change
	cancel  context.CancelFunc
	done    chan struct{}
	err     error // Watch's result, set before done closes
}

// StartWatch runs s.Watch until Stop or the end of the test.
func StartWatch(t testing.TB, s store.Store) *Watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{changes: make(chan store.Change, 1000), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.err = s.Watch(ctx, func(c store.Change) {
			select {
			case w.changes <- c:
			case <-ctx.Done():
			}
		})
	}()
	t.Cleanup(func() { w.Stop(t) })
	return w
}

// Stop cancels the Watch call and returns its error, failing the test if
// it does not return within startDeadline.
func (w *Watcher) Stop(t testing.TB) error {
	t.Helper()
	w.cancel()
	return w.Wait(t)
}

// Wait returns the Watch call's error once it returns, failing the test if
// that takes more than startDeadline.
func (w *Watcher) Wait(t testing.TB) error {
	t.Helper()
	select {
	case <-w.done:
		return w.err
	case <-time.After(startDeadline):
		t.Fatalf("Watch did not return within %v", startDeadline)
		return nil
	}
}

// Next returns the next change, failing the test if none arrives within
// d.
func (w *Watcher) Next(t testing.TB, d time.Duration) store.Change {
	t.Helper()
	select {
	case c := <-w.changes:
		return c
	case <-w.done:
		t.Fatalf("Watch returned %v while a change was awaited", w.err)
	case <-time.After(d):
		t.Fatalf("no change within %v", d)
	}
	return store.Change{}
}

// Expect fails the test unless the next change other than ChangeAll is
// want and arrives within d.
func (w *Watcher) Expect(t testing.TB, want store.Change, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		c := w.Next(t, time.Until(deadline))
		if c.Kind == store.ChangeAll {
			continue
		}
		if c != want {
			t.Fatalf("next change = %+v; want %+v", c, want)
		}
		return
	}
}

// ExpectAll fails the test unless a ChangeAll arrives within d; other
// changes before it are skipped.
func (w *Watcher) ExpectAll(t testing.TB, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for w.Next(t, time.Until(deadline)).Kind != store.ChangeAll {
	}
}

// testWatch watches one Store while another on the same database (another
// replica, or the admin CLI) and the watched one itself make changes.
func testWatch(t *testing.T, open Open) {
	ctx := t.Context()
	watched, other := open(t), open(t)
	for _, u := range []string{"alice", "bob"} {
		must(t, other.CreateUser(ctx, store.User{ID: u}))
	}
	must(t, other.CreateTeam(ctx, store.Team{ID: "red"}))
	must(t, other.CreateToken(ctx, store.Token{ID: "t1", UserID: "alice", Hash: hash("t1")}))
	must(t, other.CreateToken(ctx, store.Token{ID: "t2", UserID: "alice", Hash: hash("t2"), MachineID: "m1", Scope: store.ScopePair}))
	for _, id := range []string{"m1", "m2", "m3"} {
		must(t, other.UpsertMachine(ctx, machine(id, "alice")))
	}

	// Two watchers at once; each first reports ChangeAll.
	watchers := []*Watcher{StartWatch(t, watched), StartWatch(t, watched)}
	for _, w := range watchers {
		if c := w.Next(t, startDeadline); c.Kind != store.ChangeAll {
			t.Fatalf("first change = %+v; want ChangeAll", c)
		}
	}

	steps := []struct {
		name string
		// do makes the change; a failed call before it must publish
		// nothing, which Expect sees as the change arriving first.
		do   func() error
		want store.Change
	}{
		{"RevokeToken", func() error { _, err := other.RevokeToken(ctx, "t1", base); return err },
			store.Change{Kind: store.ChangeToken, ID: "t1"}},
		{"SpendToken", func() error { _, err := other.SpendToken(ctx, "t2", time.Time{}); return err },
			store.Change{Kind: store.ChangeToken, ID: "t2"}},
		{"a refused SpendToken publishes nothing", func() error {
			if _, err := other.SpendToken(ctx, "t2", time.Time{}); !errors.Is(err, store.ErrTokenSpent) {
				return fmt.Errorf("second SpendToken = %v; want ErrTokenSpent", err)
			}
			return other.SetUserDisabled(ctx, "alice", false)
		}, store.Change{Kind: store.ChangeUser, ID: "alice"}},
		{"SetUserDisabled", func() error { return other.SetUserDisabled(ctx, "bob", true) },
			store.Change{Kind: store.ChangeUser, ID: "bob"}},
		{"SetMember", func() error {
			return other.SetMember(ctx, store.Member{TeamID: "red", UserID: "bob", Role: store.RoleMember})
		}, store.Change{Kind: store.ChangeMembership, ID: "bob"}},
		{"RemoveMember", func() error { return other.RemoveMember(ctx, "red", "bob") },
			store.Change{Kind: store.ChangeMembership, ID: "bob"}},
		{"a failed RemoveMember publishes nothing", func() error {
			if err := other.RemoveMember(ctx, "red", "bob"); !errors.Is(err, store.ErrNotFound) {
				return err
			}
			return other.SetUserDisabled(ctx, "alice", false)
		}, store.Change{Kind: store.ChangeUser, ID: "alice"}},
		{"RevokeMachine", func() error { return other.RevokeMachine(ctx, "m1", base) },
			store.Change{Kind: store.ChangeMachine, ID: "m1"}},
		{"DeleteMachine", func() error { return other.DeleteMachine(ctx, "m2", base) },
			store.Change{Kind: store.ChangeMachine, ID: "m2"}},
		{"a failed DeleteMachine publishes nothing", func() error {
			if err := other.DeleteMachine(ctx, "nope", base); !errors.Is(err, store.ErrNotFound) {
				return err
			}
			_, err := other.RevokeToken(ctx, "t1", base)
			return err
		}, store.Change{Kind: store.ChangeToken, ID: "t1"}},
		{"a change by the watched Store itself", func() error { return watched.RevokeMachine(ctx, "m3", base) },
			store.Change{Kind: store.ChangeMachine, ID: "m3"}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		for _, w := range watchers {
			w.Expect(t, st.want, ChangeDeadline)
		}
	}

	// Cancelling ends a Watch with the context's error; closing the Store
	// ends the others with ErrClosed.
	if err := watchers[0].Stop(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Watch after cancel = %v; want context.Canceled", err)
	}
	must(t, watched.Close())
	if err := watchers[1].Wait(t); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Watch after Close = %v; want ErrClosed", err)
	}
	if err := watched.Watch(ctx, func(store.Change) {}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Watch on a closed Store = %v; want ErrClosed", err)
	}
}

// testWatchBurst commits many changes from several goroutines: every one
// arrives, each kind in its committer's order.
func testWatchBurst(t *testing.T, open Open) {
	ctx := t.Context()
	watched, other := open(t), open(t)
	w := StartWatch(t, watched)
	w.ExpectAll(t, startDeadline)
	const committers, each = 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, committers)
	for g := range committers {
		wg.Go(func() {
			s := []store.Store{watched, other}[g%2]
			for i := range each {
				if err := s.RevokeMachine(ctx, fmt.Sprintf("g%d-%d", g, i), base); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	next := make(map[int]int) // committer -> next i
	for range committers * each {
		c := w.Next(t, ChangeDeadline+time.Second)
		if c.Kind == store.ChangeAll {
			t.Fatalf("ChangeAll during a burst: a change was lost")
		}
		var g, i int
		if _, err := fmt.Sscanf(c.ID, "g%d-%d", &g, &i); err != nil || c.Kind != store.ChangeMachine {
			t.Fatalf("unexpected change %+v", c)
		}
		if i != next[g] {
			t.Fatalf("committer %d: change %d arrived when %d was expected", g, i, next[g])
		}
		next[g]++
	}
}
