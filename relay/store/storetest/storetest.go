// Package storetest is the behaviour every store.Store implementation must
// show. Each backend's tests call Run, and its benchmarks BenchEnqueue,
// BenchDeliver and BenchTokenByHash, so the backends are held to one
// definition.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
)

// Open opens a Store on one database; every call opens another Store on
// the same database, which is how Run tests reopening. The implementation
// closes the Store in tb.Cleanup (Close is idempotent, so tests may close
// it earlier).
type Open func(tb testing.TB) store.Store

// NewDB returns an Open for a fresh, empty database.
type NewDB func(tb testing.TB) Open

// Run runs the suite, one subtest per behaviour, each on its own database.
func Run(t *testing.T, newDB NewDB) {
	tests := []struct {
		name string
		f    func(t *testing.T, open Open)
	}{
		{"Machines", testMachines},
		{"CurrentMachine", testCurrentMachine},
		{"MachineReplica", testMachineReplica},
		{"EnqueuePendingOrder", testEnqueuePending},
		{"IdempotencyKey", testIdempotency},
		{"Caps", testCaps},
		{"TTLExpiry", testTTL},
		{"AckDeletes", testAck},
		{"BufferStats", testBufferStats},
		{"ConcurrentEnqueue", testConcurrentEnqueue},
		{"Reopen", testReopen},
		{"InvalidArguments", testInvalid},
		{"Closed", testClosed},
	}
	tests = append(tests, identityTests...)
	tests = append(tests, pushTests...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.f(t, newDB(t)) })
	}
}

// sameTime compares times at the microsecond precision every backend keeps.
func sameTime(a, b time.Time) bool {
	return a.Truncate(time.Microsecond).Equal(b.Truncate(time.Microsecond))
}

// base is a fixed time well inside every backend's range, at µs precision.
var base = time.Date(2026, 11, 21, 12, 0, 0, 123456000, time.UTC)

func machine(id, owner string) store.Machine {
	return store.Machine{
		ID: id, OwnerID: owner, Name: "name-" + id, Hostname: id + ".local",
		Capabilities: []string{"claude", "git"}, OS: "linux", Arch: "amd64", Version: "1.2.3",
		CPUCores: 8, MemoryBytes: 1<<64 - 1, DiskFreeBytes: 500 << 30,
		RegisteredAt: base, LastSeen: base,
	}
}

func equalMachine(a, b store.Machine) bool {
	return sameTime(a.RegisteredAt, b.RegisteredAt) && sameTime(a.LastSeen, b.LastSeen) &&
		slices.Equal(a.Capabilities, b.Capabilities) &&
		sameTime(a.RevokedAt, b.RevokedAt) && a.RevokedAt.IsZero() == b.RevokedAt.IsZero() &&
		a.ID == b.ID && a.OwnerID == b.OwnerID && a.TeamID == b.TeamID && a.Name == b.Name && a.Hostname == b.Hostname &&
		a.OS == b.OS && a.Arch == b.Arch && a.Version == b.Version && a.CPUCores == b.CPUCores &&
		a.MemoryBytes == b.MemoryBytes && a.DiskFreeBytes == b.DiskFreeBytes
}

func testMachines(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	m1, m2, m3 := machine("m1", "alice"), machine("m2", "alice"), machine("m3", "bob")
	m2.Capabilities = nil
	for _, m := range []store.Machine{m2, m1, m3} {
		if err := s.UpsertMachine(ctx, m); err != nil {
			t.Fatalf("UpsertMachine(%s): %v", m.ID, err)
		}
	}
	list, err := s.ListMachines(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || !equalMachine(list[0], m1) || list[1].ID != "m2" || len(list[1].Capabilities) != 0 {
		t.Errorf("ListMachines(alice) = %+v; want m1, m2 (no capabilities)", list)
	}
	if list, err := s.ListMachines(ctx, "carol"); err != nil || len(list) != 0 {
		t.Errorf("ListMachines(carol) = %v, %v; want none", list, err)
	}
	// GetMachine is unscoped: callers authorize.
	if got, err := s.GetMachine(ctx, "m3"); err != nil || !equalMachine(got, m3) {
		t.Errorf("GetMachine(m3 of bob) = %+v, %v; want %+v", got, err, m3)
	}
	if _, err := s.GetMachine(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetMachine(nope) = %v; want ErrNotFound", err)
	}

	// Re-registration updates details but keeps RegisteredAt.
	again := m1
	again.Name, again.Version = "renamed", "2.0.0"
	again.RegisteredAt, again.LastSeen = base.Add(time.Hour), base.Add(time.Hour)
	if err := s.UpsertMachine(ctx, again); err != nil {
		t.Fatal(err)
	}
	want := again
	want.RegisteredAt = m1.RegisteredAt
	if got, err := s.GetMachine(ctx, "m1"); err != nil || !equalMachine(got, want) {
		t.Errorf("after re-registration GetMachine = %+v, %v; want %+v", got, err, want)
	}

	stolen := m1
	stolen.OwnerID = "bob"
	if err := s.UpsertMachine(ctx, stolen); !errors.Is(err, store.ErrConflict) {
		t.Errorf("UpsertMachine(m1 for bob) = %v; want ErrConflict", err)
	}
	if got, _ := s.GetMachine(ctx, "m1"); got.Name != "renamed" {
		t.Errorf("another owner's upsert changed the machine: %+v", got)
	}

	seen := base.Add(2 * time.Hour)
	if err := s.TouchMachine(ctx, "m1", seen); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetMachine(ctx, "m1"); !sameTime(got.LastSeen, seen) {
		t.Errorf("after TouchMachine LastSeen = %v; want %v", got.LastSeen, seen)
	}
	if err := s.TouchMachine(ctx, "nope", seen); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TouchMachine(nope) = %v; want ErrNotFound", err)
	}

	// Zero times mean now.
	fresh := machine("m4", "alice")
	fresh.RegisteredAt, fresh.LastSeen = time.Time{}, time.Time{}
	before := time.Now().Add(-time.Second)
	if err := s.UpsertMachine(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetMachine(ctx, "m4"); got.RegisteredAt.Before(before) || got.LastSeen.Before(before) {
		t.Errorf("zero times stored as %v, %v; want now", got.RegisteredAt, got.LastSeen)
	}
}

func testMachineReplica(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	if err := s.UpsertMachine(ctx, machine("m1", "alice")); err != nil {
		t.Fatal(err)
	}
	replica := func() store.Machine {
		t.Helper()
		m, err := s.GetMachine(ctx, "m1")
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if got := replica().Replica; got != "" {
		t.Fatalf("new machine's Replica = %q; want empty", got)
	}
	seen := base.Add(time.Minute)
	steps := []struct {
		name  string
		do    func() error
		want  string
		since time.Time // LastSeen expected after the step
	}{
		{"set A", func() error { return s.SetMachineReplica(ctx, "m1", "10.0.0.1:8443", seen) }, "10.0.0.1:8443", seen},
		{"re-registration keeps it", func() error {
			m := machine("m1", "alice")
			m.LastSeen = seen
			return s.UpsertMachine(ctx, m)
		}, "10.0.0.1:8443", seen},
		{"moved to B", func() error { return s.SetMachineReplica(ctx, "m1", "10.0.0.2:8443", seen.Add(time.Second)) }, "10.0.0.2:8443", seen.Add(time.Second)},
		{"A's late clear is ignored", func() error { return s.ClearMachineReplica(ctx, "m1", "10.0.0.1:8443") }, "10.0.0.2:8443", seen.Add(time.Second)},
		{"B clears", func() error { return s.ClearMachineReplica(ctx, "m1", "10.0.0.2:8443") }, "", seen.Add(time.Second)},
		{"clear of unknown machine is a no-op", func() error { return s.ClearMachineReplica(ctx, "nope", "x") }, "", seen.Add(time.Second)},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := replica(); got.Replica != st.want || !sameTime(got.LastSeen, st.since) {
			t.Errorf("%s: Replica, LastSeen = %q, %v; want %q, %v", st.name, got.Replica, got.LastSeen, st.want, st.since)
		}
	}
	if err := s.SetMachineReplica(ctx, "nope", "x", seen); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetMachineReplica(nope) = %v; want ErrNotFound", err)
	}
	if err := s.SetMachineReplica(ctx, "m1", "10.0.0.3:8443", seen); err != nil {
		t.Fatal(err)
	}
	if list, err := s.ListMachines(ctx, "alice"); err != nil || len(list) != 1 || list[0].Replica != "10.0.0.3:8443" {
		t.Errorf("ListMachines = %+v, %v; want m1 on 10.0.0.3:8443", list, err)
	}
}

func testCurrentMachine(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	for _, m := range []store.Machine{machine("m1", "alice"), machine("m2", "alice"), machine("m3", "bob")} {
		if err := s.UpsertMachine(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want string) {
		t.Helper()
		if got, err := s.CurrentMachine(ctx, "alice"); err != nil || got != want {
			t.Errorf("CurrentMachine(alice) = %q, %v; want %q", got, err, want)
		}
	}
	check("")
	steps := []struct{ set, prev string }{{"m1", ""}, {"m2", "m1"}, {"m2", "m2"}}
	for _, st := range steps {
		if prev, err := s.SetCurrentMachine(ctx, "alice", st.set); err != nil || prev != st.prev {
			t.Errorf("SetCurrentMachine(alice, %s) = %q, %v; want previous %q", st.set, prev, err, st.prev)
		}
		check(st.set)
	}
	// The store only checks that the machine exists; the caller authorizes.
	if prev, err := s.SetCurrentMachine(ctx, "alice", "m3"); err != nil || prev != "m2" {
		t.Errorf("SetCurrentMachine(alice, bob's m3) = %q, %v; want previous m2", prev, err)
	}
	check("m3")
	if prev, err := s.SetCurrentMachine(ctx, "alice", "m2"); err != nil || prev != "m3" {
		t.Errorf("SetCurrentMachine(alice, m2) = %q, %v; want previous m3", prev, err)
	}
	if _, err := s.SetCurrentMachine(ctx, "alice", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetCurrentMachine(alice, nope) = %v; want ErrNotFound", err)
	}
	check("m2")
	if got, _ := s.CurrentMachine(ctx, "bob"); got != "" {
		t.Errorf("CurrentMachine(bob) = %q; want none", got)
	}
	if prev, err := s.SetCurrentMachine(ctx, "alice", ""); err != nil || prev != "m2" {
		t.Errorf("SetCurrentMachine(alice, \"\") = %q, %v; want previous m2", prev, err)
	}
	check("")
}

func message(machineID, key string, payload string) store.Message {
	return store.Message{
		MachineID: machineID, OwnerID: "alice", IdempotencyKey: key,
		Service: "betcode.v1.AgentService", Method: "Converse",
		Metadata: map[string]string{"x-request-id": key}, Payload: []byte(payload),
	}
}

func equalMessage(a, b store.Message) bool {
	return a.ID == b.ID && a.MachineID == b.MachineID && a.OwnerID == b.OwnerID &&
		a.IdempotencyKey == b.IdempotencyKey && a.Service == b.Service && a.Method == b.Method &&
		maps.Equal(a.Metadata, b.Metadata) && string(a.Payload) == string(b.Payload) &&
		sameTime(a.CreatedAt, b.CreatedAt) && sameTime(a.ExpiresAt, b.ExpiresAt)
}

// enqueue stores m and returns it with its id, failing the test on error.
func enqueue(t *testing.T, s store.Store, m store.Message, lim store.Limits) store.Message {
	t.Helper()
	id, dup, err := s.Enqueue(t.Context(), m, lim)
	if err != nil || dup || id <= 0 {
		t.Fatalf("Enqueue(%s/%s) = %d, %v, %v; want a new id", m.MachineID, m.IdempotencyKey, id, dup, err)
	}
	m.ID = id
	return m
}

func pending(t *testing.T, s store.Store, machineID string, after int64, limit int) []store.Message {
	t.Helper()
	msgs, err := s.Pending(t.Context(), machineID, after, limit)
	if err != nil {
		t.Fatalf("Pending(%s, %d, %d): %v", machineID, after, limit, err)
	}
	return msgs
}

func ids(msgs []store.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func testEnqueuePending(t *testing.T, open Open) {
	s := open(t)
	var want []store.Message
	for i := range 10 {
		m := message("m1", fmt.Sprintf("k%d", i), fmt.Sprintf("payload %d", i))
		m.CreatedAt = base.Add(time.Duration(i) * time.Second)
		m.ExpiresAt = time.Now().Add(time.Hour)
		if i == 3 {
			m.Metadata, m.Payload = nil, nil // stored as empty
		}
		want = append(want, enqueue(t, s, m, store.Limits{}))
		enqueue(t, s, message("m2", fmt.Sprintf("k%d", i), "other machine"), store.Limits{})
	}
	for i := 1; i < len(want); i++ {
		if want[i].ID <= want[i-1].ID {
			t.Fatalf("ids not increasing: %v", ids(want))
		}
	}
	got := pending(t, s, "m1", 0, 100)
	if len(got) != len(want) {
		t.Fatalf("Pending = %d messages; want %d", len(got), len(want))
	}
	for i := range got {
		w := want[i]
		if w.Metadata == nil {
			if len(got[i].Metadata) == 0 && len(got[i].Payload) == 0 {
				got[i].Metadata, got[i].Payload = nil, nil
			}
		}
		if !equalMessage(got[i], w) {
			t.Errorf("Pending[%d] = %+v; want %+v", i, got[i], w)
		}
	}
	if got := ids(pending(t, s, "m1", want[4].ID, 3)); !slices.Equal(got, ids(want[5:8])) {
		t.Errorf("Pending(after %d, limit 3) = %v; want %v", want[4].ID, got, ids(want[5:8]))
	}
	if got := pending(t, s, "m1", want[9].ID, 10); len(got) != 0 {
		t.Errorf("Pending after the last id = %v; want none", ids(got))
	}
	if got := pending(t, s, "nope", 0, 10); len(got) != 0 {
		t.Errorf("Pending(unknown machine) = %v; want none", ids(got))
	}
	// A default TTL is 7 days from CreatedAt.
	m := enqueue(t, s, message("m3", "k", "x"), store.Limits{})
	got3 := pending(t, s, "m3", 0, 1)
	if len(got3) != 1 || !sameTime(got3[0].ExpiresAt, got3[0].CreatedAt.Add(store.DefaultTTL)) ||
		time.Since(got3[0].CreatedAt) > time.Minute {
		t.Errorf("Pending(m3) = %+v; want CreatedAt now and ExpiresAt 7 days later (id %d)", got3, m.ID)
	}
}

func testIdempotency(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	first := enqueue(t, s, message("m1", "k1", "first"), store.Limits{})
	id, dup, err := s.Enqueue(ctx, message("m1", "k1", "retry with another body"), store.Limits{})
	if err != nil || !dup || id != first.ID {
		t.Errorf("repeat Enqueue = %d, %v, %v; want %d, duplicate", id, dup, err, first.ID)
	}
	if got := pending(t, s, "m1", 0, 10); len(got) != 1 || string(got[0].Payload) != "first" {
		t.Errorf("after a duplicate Pending = %+v; want the first message only", got)
	}
	other := enqueue(t, s, message("m2", "k1", "same key, other machine"), store.Limits{})
	if other.ID == first.ID {
		t.Error("the same key on another machine was deduplicated")
	}
	enqueue(t, s, message("m1", "", "no key"), store.Limits{})
	enqueue(t, s, message("m1", "", "no key"), store.Limits{})
	if n, _, err := s.Counts(ctx, "m1"); err != nil || n != 3 {
		t.Errorf("Counts(m1) = %d, %v; want 3 (empty keys are not deduplicated)", n, err)
	}

	// Concurrent repeats of one key, which may share a batch: one stores.
	const n = 16
	var (
		wg      sync.WaitGroup
		gotIDs  [n]int64
		gotDups [n]bool
		errs    [n]error
	)
	for i := range n {
		wg.Go(func() {
			gotIDs[i], gotDups[i], errs[i] = s.Enqueue(ctx, message("m3", "race", fmt.Sprint(i)), store.Limits{})
		})
	}
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil || gotIDs[i] != gotIDs[0] {
			t.Errorf("concurrent Enqueue %d = %d, %v; want id %d", i, gotIDs[i], errs[i], gotIDs[0])
		}
		if !gotDups[i] {
			fresh++
		}
	}
	if c, _, _ := s.Counts(ctx, "m3"); fresh != 1 || c != 1 {
		t.Errorf("%d concurrent Enqueues of one key: %d not duplicates, %d stored; want 1 and 1", n, fresh, c)
	}
}

func testCaps(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	byCount := store.Limits{MaxMessages: 3}
	var stored []store.Message
	for i := range 3 {
		stored = append(stored, enqueue(t, s, message("m1", fmt.Sprint(i), "x"), byCount))
	}
	_, _, err := s.Enqueue(ctx, message("m1", "3", "x"), byCount)
	if !errors.Is(err, store.ErrBufferFull) || !strings.Contains(err.Error(), "3 messages") {
		t.Errorf("4th Enqueue with MaxMessages 3 = %v; want ErrBufferFull naming the counts", err)
	}
	// A retry of a stored message is still answered when the buffer is full.
	if id, dup, err := s.Enqueue(ctx, message("m1", "0", "x"), byCount); err != nil || !dup || id != stored[0].ID {
		t.Errorf("duplicate Enqueue into a full buffer = %d, %v, %v; want %d, duplicate", id, dup, err, stored[0].ID)
	}
	if err := s.Ack(ctx, "m1", stored[0].ID); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, message("m1", "3", "x"), byCount) // room again

	bySize := store.Limits{MaxBytes: 100}
	big := message("m2", "a", strings.Repeat("a", 60))
	big.Metadata = nil
	enqueue(t, s, big, bySize)
	big.IdempotencyKey = "b"
	if _, _, err := s.Enqueue(ctx, big, bySize); !errors.Is(err, store.ErrBufferFull) || !strings.Contains(err.Error(), "60 bytes") {
		t.Errorf("Enqueue past MaxBytes = %v; want ErrBufferFull naming the bytes held", err)
	}
	small := message("m2", "c", strings.Repeat("c", 30))
	small.Metadata = map[string]string{"k": "123456789"} // 30 + 10 = 40 bytes: exactly full
	enqueue(t, s, small, bySize)
	if n, b, err := s.Counts(ctx, "m2"); err != nil || n != 2 || b != 100 {
		t.Errorf("Counts(m2) = %d, %d, %v; want 2, 100", n, b, err)
	}
	// Other machines have their own caps.
	enqueue(t, s, message("m3", "a", "x"), store.Limits{MaxMessages: 1})
}

func testTTL(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	now := time.Now()
	expired := message("m1", "old", "old")
	expired.CreatedAt = now.Add(-2 * time.Hour)
	lim := store.Limits{TTL: time.Hour}
	old := enqueue(t, s, expired, lim)
	live := enqueue(t, s, message("m1", "new", "new"), lim)
	enqueue(t, s, message("m2", "new", "other"), lim)
	if got := pending(t, s, "m1", 0, 10); !slices.Equal(ids(got), []int64{live.ID}) {
		t.Errorf("Pending = %v; want only the unexpired %d (expired %d)", ids(got), live.ID, old.ID)
	}
	if n, _, _ := s.Counts(ctx, "m1"); n != 2 {
		t.Errorf("Counts before purge = %d; want 2 (expired rows count until purged)", n)
	}
	if n, err := s.PurgeExpired(ctx, now); err != nil || n != 1 {
		t.Errorf("PurgeExpired = %d, %v; want 1", n, err)
	}
	if n, b, _ := s.Counts(ctx, "m1"); n != 1 || b != live.Size() {
		t.Errorf("Counts after purge = %d, %d; want 1, %d", n, b, live.Size())
	}
	if n, err := s.PurgeExpired(ctx, now); err != nil || n != 0 {
		t.Errorf("second PurgeExpired = %d, %v; want 0", n, err)
	}
	if got := pending(t, s, "m1", 0, 10); !slices.Equal(ids(got), []int64{live.ID}) {
		t.Errorf("Pending after purge = %v; want %d", ids(got), live.ID)
	}

	// A buffer full of expired messages takes new ones without waiting for
	// the purge.
	two := store.Limits{MaxMessages: 2, TTL: time.Hour}
	for _, k := range []string{"x", "y"} {
		m := message("m3", k, k)
		m.CreatedAt = now.Add(-2 * time.Hour)
		enqueue(t, s, m, two)
	}
	enqueue(t, s, message("m3", "z", "z"), two)
	if n, _, _ := s.Counts(ctx, "m3"); n != 1 {
		t.Errorf("Counts after enqueueing into a buffer of expired messages = %d; want 1", n)
	}
}

// testBufferStats: the buffer's depth per machine class (expired messages
// count until purged) and each class's oldest unexpired message. A machine
// is connected while its recorded replica was refreshed at or after
// liveSince; one never registered counts as offline.
func testBufferStats(t *testing.T, open Open) {
	ctx := t.Context()
	s, ok := open(t).(interface {
		BufferStats(ctx context.Context, now, liveSince time.Time) (connected, offline store.BufferStat, err error)
	})
	if !ok {
		t.Fatal("the store has no BufferStats method (the relay's buffer metrics need it)")
	}
	now := time.Now()
	liveSince := now.Add(-30 * time.Second)
	if c, o, err := s.BufferStats(ctx, now, liveSince); err != nil || c != (store.BufferStat{}) || o != (store.BufferStat{}) {
		t.Fatalf("BufferStats of an empty buffer = %+v, %+v, %v; want zeros", c, o, err)
	}
	st := s.(store.Store)
	for _, m := range []struct {
		id   string
		seen time.Time
	}{{"live", now}, {"stale", now.Add(-time.Minute)}} {
		if err := st.UpsertMachine(ctx, machine(m.id, "u1")); err != nil {
			t.Fatal(err)
		}
		if err := st.SetMachineReplica(ctx, m.id, "replica-a", m.seen); err != nil {
			t.Fatal(err)
		}
	}
	lim := store.Limits{TTL: time.Hour}
	expired := message("m1", "old", "old")
	expired.CreatedAt = now.Add(-2 * time.Hour)
	enqueue(t, st, expired, lim)
	offlineOldest := message("stale", "a", "a")
	offlineOldest.CreatedAt = now.Add(-10 * time.Minute)
	enqueue(t, st, offlineOldest, lim)
	enqueue(t, st, message("m1", "new", "new"), lim)
	liveOldest := message("live", "b", "b")
	liveOldest.CreatedAt = now.Add(-3 * time.Second)
	enqueue(t, st, liveOldest, lim)
	c, o, err := s.BufferStats(ctx, now, liveSince)
	if err != nil {
		t.Fatal(err)
	}
	if c.Messages != 1 || !sameTime(c.Oldest, liveOldest.CreatedAt) {
		t.Errorf("connected = %+v; want 1 message, oldest %v", c, liveOldest.CreatedAt)
	}
	if o.Messages != 3 || !sameTime(o.Oldest, offlineOldest.CreatedAt) {
		t.Errorf("offline = %+v; want 3 messages (the expired one counts until purged), oldest %v", o, offlineOldest.CreatedAt)
	}
}

func testAck(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	var msgs []store.Message
	for i := range 5 {
		msgs = append(msgs, enqueue(t, s, message("m1", fmt.Sprint(i), "0123456789"), store.Limits{}))
	}
	other := enqueue(t, s, message("m2", "0", "x"), store.Limits{})
	if err := s.Ack(ctx, "m1", msgs[0].ID, msgs[1].ID, other.ID); err != nil {
		t.Fatal(err)
	}
	if got := ids(pending(t, s, "m1", 0, 10)); !slices.Equal(got, ids(msgs[2:])) {
		t.Errorf("Pending after Ack = %v; want %v", got, ids(msgs[2:]))
	}
	if got := pending(t, s, "m2", 0, 10); len(got) != 1 {
		t.Errorf("Ack of machine m1 deleted m2's message %d", other.ID)
	}
	if n, b, err := s.Counts(ctx, "m1"); err != nil || n != 3 || b != 3*msgs[0].Size() {
		t.Errorf("Counts = %d, %d, %v; want 3, %d", n, b, err, 3*msgs[0].Size())
	}
	if err := s.Ack(ctx, "m1", msgs[0].ID, 1<<40); err != nil {
		t.Errorf("Ack of acked and unknown ids = %v; want nil", err)
	}
	if err := s.Ack(ctx, "m1"); err != nil {
		t.Errorf("Ack() = %v", err)
	}
	if n, _, _ := s.Counts(ctx, "m1"); n != 3 {
		t.Errorf("Counts after repeated Ack = %d; want 3", n)
	}
	if n, b, err := s.Counts(ctx, "never"); err != nil || n != 0 || b != 0 {
		t.Errorf("Counts(never) = %d, %d, %v", n, b, err)
	}
}

func testConcurrentEnqueue(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	const goroutines, each = 32, 100
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			machineID := fmt.Sprintf("m%d", g%4)
			for i := range each {
				m := message(machineID, fmt.Sprintf("g%d-%d", g, i), fmt.Sprintf("%d %d", g, i))
				if _, dup, err := s.Enqueue(ctx, m, store.Limits{}); err != nil || dup {
					errs <- fmt.Errorf("goroutine %d message %d: dup %v, %w", g, i, dup, err)
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
	total := 0
	seen := make(map[int64]bool)
	for mi := range 4 {
		machineID := fmt.Sprintf("m%d", mi)
		next := make(map[int]int) // goroutine -> next expected i
		var after int64
		for {
			page := pending(t, s, machineID, after, 97)
			if len(page) == 0 {
				break
			}
			for _, m := range page {
				var g, i int
				if _, err := fmt.Sscanf(string(m.Payload), "%d %d", &g, &i); err != nil {
					t.Fatalf("payload %q: %v", m.Payload, err)
				}
				if i != next[g] {
					t.Fatalf("machine %s: goroutine %d's message %d arrived when %d was expected", machineID, g, i, next[g])
				}
				next[g]++
				if seen[m.ID] {
					t.Fatalf("id %d twice", m.ID)
				}
				seen[m.ID] = true
				total++
			}
			after = page[len(page)-1].ID
		}
		if n, _, err := s.Counts(ctx, machineID); err != nil || n != goroutines/4*each {
			t.Errorf("Counts(%s) = %d, %v; want %d", machineID, n, err, goroutines/4*each)
		}
	}
	if total != goroutines*each {
		t.Errorf("Pending returned %d messages; want %d", total, goroutines*each)
	}
}

func testReopen(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	if err := s.UpsertMachine(ctx, machine("m1", "alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetCurrentMachine(ctx, "alice", "m1"); err != nil {
		t.Fatal(err)
	}
	kept := message("m1", "k", "kept")
	kept.CreatedAt, kept.ExpiresAt = base, time.Now().Add(time.Hour)
	m := enqueue(t, s, kept, store.Limits{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}

	s = open(t)
	if got, err := s.GetMachine(ctx, "m1"); err != nil || !equalMachine(got, machine("m1", "alice")) {
		t.Errorf("after reopen GetMachine = %+v, %v", got, err)
	}
	if got, err := s.CurrentMachine(ctx, "alice"); err != nil || got != "m1" {
		t.Errorf("after reopen CurrentMachine = %q, %v; want m1", got, err)
	}
	if got := pending(t, s, "m1", 0, 10); len(got) != 1 || !equalMessage(got[0], m) {
		t.Errorf("after reopen Pending = %+v; want %+v", got, m)
	}
	// Idempotency survives a restart: a client retrying after a relay crash.
	if id, dup, err := s.Enqueue(ctx, message("m1", "k", "retry"), store.Limits{}); err != nil || !dup || id != m.ID {
		t.Errorf("after reopen repeat Enqueue = %d, %v, %v; want %d, duplicate", id, dup, err, m.ID)
	}
	next := enqueue(t, s, message("m1", "k2", "next"), store.Limits{})
	if next.ID <= m.ID {
		t.Errorf("id after reopen %d <= earlier id %d", next.ID, m.ID)
	}
}

func testInvalid(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	bad := []struct {
		name string
		m    store.Message
		lim  store.Limits
	}{
		{"no machine", message("", "k", "x"), store.Limits{}},
		{"NUL in key", message("m1", "k\x00", "x"), store.Limits{}},
		{"invalid UTF-8 in metadata", store.Message{MachineID: "m1", Metadata: map[string]string{"k": "\xff"}}, store.Limits{}},
		{"negative limit", message("m1", "k", "x"), store.Limits{MaxMessages: -1}},
	}
	for _, tt := range bad {
		if _, _, err := s.Enqueue(ctx, tt.m, tt.lim); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Enqueue(%s) = %v; want ErrInvalid", tt.name, err)
		}
	}
	if err := s.UpsertMachine(ctx, store.Machine{ID: "m1"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("UpsertMachine without owner = %v; want ErrInvalid", err)
	}
	enqueue(t, s, message("m1", "k", "binary \x00\xff payload is fine"), store.Limits{})
}

func testClosed(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Enqueue(ctx, message("m1", "k", "x"), store.Limits{}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Enqueue after Close = %v; want ErrClosed", err)
	}
	if _, err := s.Pending(ctx, "m1", 0, 1); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Pending after Close = %v; want ErrClosed", err)
	}
	if _, err := s.GetUser(ctx, "alice"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("GetUser after Close = %v; want ErrClosed", err)
	}
	if err := s.Watch(ctx, func(store.Change) {}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Watch after Close = %v; want ErrClosed", err)
	}
}
