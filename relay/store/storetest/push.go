package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
)

// pushTests are the store.Push behaviours, run by Run.
var pushTests = []struct {
	name string
	f    func(t *testing.T, open Open)
}{
	{"PushSubscriptions", testPushSubscriptions},
	{"PushOutcome", testPushOutcome},
	{"PushClaimOnce", testPushClaimOnce},
	{"PushPrune", testPushPrune},
	{"VAPIDKeyShared", testVAPIDKey},
	{"PushInvalidArguments", testPushInvalid},
}

func pushSub(user, endpoint string) store.PushSubscription {
	return store.PushSubscription{UserID: user, Endpoint: endpoint, P256dh: "BPub-" + endpoint, Auth: "auth-" + endpoint, Name: "phone", CreatedAt: base}
}

func subIDs(subs []store.PushSubscription) []string {
	var ids []string
	for _, s := range subs {
		ids = append(ids, s.ID)
	}
	return ids
}

func testPushSubscriptions(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	a1in := pushSub("alice", "https://push.example/a1")
	a1in.Kinds = []string{"permission_request"}
	a1, err := s.AddPushSubscription(ctx, a1in)
	must(t, err)
	if a1.ID == "" || a1.UserID != "alice" || a1.Endpoint != a1in.Endpoint || a1.P256dh != a1in.P256dh || a1.Auth != a1in.Auth ||
		a1.Name != "phone" || !slices.Equal(a1.Kinds, a1in.Kinds) || !sameTime(a1.CreatedAt, base) || a1.LastStatus != "" || !a1.LastAt.IsZero() {
		t.Errorf("AddPushSubscription = %+v; want the stored row with an id", a1)
	}
	a2in := pushSub("alice", "https://push.example/a2")
	a2in.CreatedAt = base.Add(time.Minute)
	a2, err := s.AddPushSubscription(ctx, a2in)
	must(t, err)
	b1in := pushSub("bob", "https://push.example/b1")
	b1in.CreatedAt = time.Time{} // now
	b1, err := s.AddPushSubscription(ctx, b1in)
	must(t, err)
	if b1.CreatedAt.IsZero() || len(b1.Kinds) != 0 {
		t.Errorf("AddPushSubscription(zero CreatedAt, no kinds) = %+v; want now, no kinds", b1)
	}
	if a1.ID == a2.ID || a2.ID == b1.ID {
		t.Errorf("ids %q %q %q are not distinct", a1.ID, a2.ID, b1.ID)
	}
	list, err := s.PushSubscriptions(ctx, "alice")
	if err != nil || !slices.Equal(subIDs(list), []string{a1.ID, a2.ID}) || !slices.Equal(list[0].Kinds, a1in.Kinds) {
		t.Errorf("PushSubscriptions(alice) = %v, %v; want %s, %s (oldest first)", subIDs(list), err, a1.ID, a2.ID)
	}
	if list, err := s.PushSubscriptions(ctx, "carol"); err != nil || len(list) != 0 {
		t.Errorf("PushSubscriptions(carol) = %v, %v; want none", list, err)
	}

	// The same endpoint again, now for bob (the browser changed user):
	// the row moves, keeps its id, takes the new keys and forgets its
	// delivery state.
	must(t, s.RecordPushOutcome(ctx, a2.ID, store.PushFailed, base.Add(time.Hour), "503 from push service"))
	moved := a2in
	moved.UserID, moved.P256dh, moved.Auth, moved.Name = "bob", "BNew", "authNew", "bob's phone"
	got, err := s.AddPushSubscription(ctx, moved)
	must(t, err)
	if got.ID != a2.ID || got.UserID != "bob" || got.P256dh != "BNew" || got.Auth != "authNew" || got.Name != "bob's phone" ||
		got.LastStatus != "" || !got.LastAt.IsZero() || got.LastError != "" || !sameTime(got.CreatedAt, a2.CreatedAt) {
		t.Errorf("AddPushSubscription(same endpoint for bob) = %+v; want row %s moved to bob with the new keys, state cleared", got, a2.ID)
	}
	if list, _ := s.PushSubscriptions(ctx, "alice"); !slices.Equal(subIDs(list), []string{a1.ID}) {
		t.Errorf("after the move PushSubscriptions(alice) = %v; want %s", subIDs(list), a1.ID)
	}
	if list, _ := s.PushSubscriptions(ctx, "bob"); len(list) != 2 {
		t.Errorf("after the move PushSubscriptions(bob) = %v; want two", subIDs(list))
	}

	// Only the owner deletes.
	if err := s.DeletePushSubscription(ctx, "alice", b1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeletePushSubscription(alice, bob's) = %v; want ErrNotFound", err)
	}
	if err := s.DeletePushSubscription(ctx, "alice", "ps_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeletePushSubscription(unknown) = %v; want ErrNotFound", err)
	}
	must(t, s.DeletePushSubscription(ctx, "bob", b1.ID))
	if list, _ := s.PushSubscriptions(ctx, "bob"); !slices.Equal(subIDs(list), []string{a2.ID}) {
		t.Errorf("after delete PushSubscriptions(bob) = %v; want %s", subIDs(list), a2.ID)
	}
	if err := s.DeletePushSubscription(ctx, "bob", b1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeletePushSubscription twice = %v; want ErrNotFound", err)
	}

	// A reopened store has them.
	if list, err := open(t).PushSubscriptions(ctx, "alice"); err != nil || len(list) != 1 || list[0].Endpoint != a1in.Endpoint {
		t.Errorf("reopened PushSubscriptions(alice) = %+v, %v", list, err)
	}
}

func testPushOutcome(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	sub, err := s.AddPushSubscription(ctx, pushSub("alice", "https://push.example/1"))
	must(t, err)
	steps := []struct {
		name, status, errText string
		at                    time.Time
		wantStatus, wantError string
	}{
		{"sent", store.PushSent, "", base.Add(time.Minute), store.PushSent, ""},
		{"failed", store.PushFailed, "push service: 500", base.Add(2 * time.Minute), store.PushFailed, "push service: 500"},
		{"sent again clears the error", store.PushSent, "", base.Add(3 * time.Minute), store.PushSent, ""},
		{"expired", store.PushExpired, "push service: 410 Gone", base.Add(4 * time.Minute), store.PushExpired, "push service: 410 Gone"},
		{"a late success does not revive it", store.PushSent, "", base.Add(5 * time.Minute), store.PushExpired, "push service: 410 Gone"},
	}
	for _, st := range steps {
		must(t, s.RecordPushOutcome(ctx, sub.ID, st.status, st.at, st.errText))
		list, err := s.PushSubscriptions(ctx, "alice")
		if err != nil || len(list) != 1 || list[0].LastStatus != st.wantStatus || list[0].LastError != st.wantError || !sameTime(list[0].LastAt, st.at) {
			t.Errorf("%s: subscription = %+v, %v; want status %q error %q at %v", st.name, list, err, st.wantStatus, st.wantError, st.at)
		}
	}
	if err := s.RecordPushOutcome(ctx, "ps_nope", store.PushSent, base, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RecordPushOutcome(unknown) = %v; want ErrNotFound", err)
	}
}

// testPushClaimOnce claims one key from many goroutines over two stores
// on one database (two relay replicas): exactly one wins.
func testPushClaimOnce(t *testing.T, open Open) {
	ctx := t.Context()
	stores := []store.Store{open(t), open(t)}
	const each = 8
	var won atomic.Int32
	var wg sync.WaitGroup
	for _, s := range stores {
		for range each {
			wg.Go(func() {
				ok, err := s.ClaimPushKey(ctx, "ps_1", "m1/s1/r1", base)
				if err != nil {
					t.Error(err)
				}
				if ok {
					won.Add(1)
				}
			})
		}
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Errorf("%d of %d concurrent claims won; want exactly 1", won.Load(), 2*each)
	}
	// Other keys and other subscriptions are claims of their own.
	for _, c := range []struct{ sub, key string }{{"ps_1", "m1/s1/r2"}, {"ps_2", "m1/s1/r1"}} {
		if ok, err := stores[1].ClaimPushKey(ctx, c.sub, c.key, base); err != nil || !ok {
			t.Errorf("ClaimPushKey(%s, %s) = %v, %v; want true", c.sub, c.key, ok, err)
		}
	}
}

func testPushPrune(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	add := func(endpoint string, created time.Time) store.PushSubscription {
		sub := pushSub("alice", endpoint)
		sub.CreatedAt = created
		got, err := s.AddPushSubscription(ctx, sub)
		must(t, err)
		return got
	}
	live := add("https://push.example/live", base)
	gone := add("https://push.example/gone", base.Add(time.Second))
	recent := add("https://push.example/recent", base.Add(2*time.Second))
	must(t, s.RecordPushOutcome(ctx, gone.ID, store.PushExpired, base, "410"))
	must(t, s.RecordPushOutcome(ctx, recent.ID, store.PushExpired, base.Add(2*time.Hour), "410"))
	for i, at := range []time.Time{base, base.Add(30 * time.Minute), base.Add(2 * time.Hour)} {
		if ok, err := s.ClaimPushKey(ctx, live.ID, fmt.Sprint("k", i), at); err != nil || !ok {
			t.Fatalf("ClaimPushKey = %v, %v", ok, err)
		}
	}
	// Deleted: claims k0 and k1 (before base+1h) and the subscription
	// that expired at base.
	n, err := s.PrunePush(ctx, base.Add(time.Hour))
	if err != nil || n != 3 {
		t.Errorf("PrunePush = %d, %v; want 3 rows", n, err)
	}
	if list, _ := s.PushSubscriptions(ctx, "alice"); !slices.Equal(subIDs(list), []string{live.ID, recent.ID}) {
		t.Errorf("after PrunePush subscriptions = %v; want %s, %s", subIDs(list), live.ID, recent.ID)
	}
	for i, want := range []bool{true, true, false} {
		if ok, err := s.ClaimPushKey(ctx, live.ID, fmt.Sprint("k", i), base.Add(3*time.Hour)); err != nil || ok != want {
			t.Errorf("ClaimPushKey(k%d) after prune = %v, %v; want %v", i, ok, err, want)
		}
	}
}

func testVAPIDKey(t *testing.T, open Open) {
	ctx := t.Context()
	a, b := open(t), open(t)
	first, err := a.VAPIDKey(ctx, store.VAPIDKey{Private: "priv-1", Public: "pub-1", CreatedAt: base})
	must(t, err)
	if first.Private != "priv-1" || first.Public != "pub-1" || !sameTime(first.CreatedAt, base) {
		t.Errorf("first VAPIDKey = %+v; want the candidate stored", first)
	}
	second, err := b.VAPIDKey(ctx, store.VAPIDKey{Private: "priv-2", Public: "pub-2"})
	must(t, err)
	if second.Private != "priv-1" || second.Public != "pub-1" {
		t.Errorf("second VAPIDKey = %+v; want the stored pub-1", second)
	}
}

func testPushInvalid(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	bad := []struct {
		name string
		sub  store.PushSubscription
	}{
		{"no user", store.PushSubscription{Endpoint: "https://e", P256dh: "k", Auth: "a"}},
		{"no endpoint", store.PushSubscription{UserID: "u", P256dh: "k", Auth: "a"}},
		{"no p256dh", store.PushSubscription{UserID: "u", Endpoint: "https://e", Auth: "a"}},
		{"no auth", store.PushSubscription{UserID: "u", Endpoint: "https://e", P256dh: "k"}},
		{"NUL in name", store.PushSubscription{UserID: "u", Endpoint: "https://e", P256dh: "k", Auth: "a", Name: "a\x00b"}},
	}
	for _, b := range bad {
		if _, err := s.AddPushSubscription(ctx, b.sub); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("AddPushSubscription(%s) = %v; want ErrInvalid", b.name, err)
		}
	}
	if err := s.RecordPushOutcome(ctx, "ps_1", "delivered", base, ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("RecordPushOutcome(unknown status) = %v; want ErrInvalid", err)
	}
	if _, err := s.ClaimPushKey(ctx, "ps_1", "", base); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ClaimPushKey(empty key) = %v; want ErrInvalid", err)
	}
	if _, err := s.VAPIDKey(ctx, store.VAPIDKey{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("VAPIDKey(empty) = %v; want ErrInvalid", err)
	}
}
