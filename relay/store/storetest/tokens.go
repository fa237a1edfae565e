package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
)

func equalToken(a, b store.Token) bool {
	return a.ID == b.ID && a.UserID == b.UserID && a.Name == b.Name && bytes.Equal(a.Hash, b.Hash) &&
		sameTime(a.CreatedAt, b.CreatedAt) && sameTime(a.ExpiresAt, b.ExpiresAt) &&
		sameTime(a.LastUsedAt, b.LastUsedAt) && sameTime(a.RevokedAt, b.RevokedAt) &&
		a.ExpiresAt.IsZero() == b.ExpiresAt.IsZero() && a.LastUsedAt.IsZero() == b.LastUsedAt.IsZero() &&
		a.RevokedAt.IsZero() == b.RevokedAt.IsZero() && a.LastUsedAddr == b.LastUsedAddr &&
		a.MachineID == b.MachineID && a.Scope == b.Scope
}

func testTokens(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	tok := func(id, user string, created time.Time) store.Token {
		return store.Token{ID: id, UserID: user, Name: "laptop " + id, Hash: hash("secret " + id), CreatedAt: created}
	}
	t1 := tok("t1", "alice", base)
	t2 := tok("t2", "alice", base.Add(time.Minute))
	t2.ExpiresAt = base.Add(24 * time.Hour)
	t3 := tok("t3", "bob", base.Add(2*time.Minute))
	for _, tk := range []store.Token{t1, t2, t3} {
		must(t, s.CreateToken(ctx, tk))
	}
	dupID := tok("t1", "carol", base)
	dupID.Hash = hash("another secret")
	dupHash := tok("t4", "carol", base)
	dupHash.Hash = t1.Hash
	for name, tk := range map[string]store.Token{"id": dupID, "hash": dupHash} {
		if err := s.CreateToken(ctx, tk); !errors.Is(err, store.ErrExists) {
			t.Errorf("CreateToken with an existing %s = %v; want ErrExists", name, err)
		}
	}

	lookups := []struct {
		name string
		hash []byte
		want store.Token
		err  error
	}{
		{"no expiry (zero stays zero)", t1.Hash, t1, nil},
		{"with expiry", t2.Hash, t2, nil},
		{"unknown", hash("nope"), store.Token{}, store.ErrNotFound},
	}
	for _, l := range lookups {
		got, err := s.TokenByHash(ctx, l.hash)
		if !errors.Is(err, l.err) || (l.err == nil && !equalToken(got, l.want)) {
			t.Errorf("TokenByHash(%s) = %+v, %v; want %+v, %v", l.name, got, err, l.want, l.err)
		}
	}

	lists := []struct {
		user string
		want []string
	}{
		{"alice", []string{"t2", "t1"}},
		{"bob", []string{"t3"}},
		{"", []string{"t3", "t2", "t1"}},
		{"carol", nil},
	}
	for _, l := range lists {
		list, err := s.ListTokens(ctx, l.user)
		var ids []string
		for _, tk := range list {
			ids = append(ids, tk.ID)
		}
		if err != nil || !slices.Equal(ids, l.want) {
			t.Errorf("ListTokens(%q) = %v, %v; want %v (newest first)", l.user, ids, err, l.want)
		}
	}

	// Revoking keeps the first time, and returns the token.
	first := base.Add(time.Hour)
	for _, at := range []time.Time{first, first.Add(time.Hour)} {
		got, err := s.RevokeToken(ctx, "t1", at)
		want := t1
		want.RevokedAt = first
		if err != nil || !equalToken(got, want) {
			t.Errorf("RevokeToken(t1, %v) = %+v, %v; want %+v", at, got, err, want)
		}
	}
	if got, err := s.TokenByHash(ctx, t1.Hash); err != nil || !sameTime(got.RevokedAt, first) || got.Live(first) {
		t.Errorf("revoked token = %+v, %v; want revoked at %v (and not live)", got, err, first)
	}
	if _, err := s.RevokeToken(ctx, "nope", first); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeToken(nope) = %v; want ErrNotFound", err)
	}

	used := base.Add(3 * time.Hour)
	must(t, s.TouchToken(ctx, "t2", used, "203.0.113.7:51234"))
	must(t, s.TouchToken(ctx, "t2", used.Add(time.Second), "203.0.113.8:40000"))
	want := t2
	want.LastUsedAt, want.LastUsedAddr = used.Add(time.Second), "203.0.113.8:40000"
	if got, err := s.TokenByHash(ctx, t2.Hash); err != nil || !equalToken(got, want) {
		t.Errorf("after TouchToken TokenByHash(t2) = %+v, %v; want %+v", got, err, want)
	}
	if err := s.TouchToken(ctx, "nope", used, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TouchToken(nope) = %v; want ErrNotFound", err)
	}

	// A zero CreatedAt means now.
	before := time.Now().Add(-time.Second)
	must(t, s.CreateToken(ctx, store.Token{ID: "t5", UserID: "dave", Hash: hash("t5")}))
	if got, err := s.TokenByHash(ctx, hash("t5")); err != nil || got.CreatedAt.Before(before) {
		t.Errorf("token with zero CreatedAt = %+v, %v; want created now", got, err)
	}
}

func equalEnroll(a, b store.EnrollToken) bool {
	return a.ID == b.ID && bytes.Equal(a.Hash, b.Hash) && a.TeamID == b.TeamID && a.UserID == b.UserID &&
		sameTime(a.CreatedAt, b.CreatedAt) && sameTime(a.ExpiresAt, b.ExpiresAt) && sameTime(a.UsedAt, b.UsedAt) &&
		a.ExpiresAt.IsZero() == b.ExpiresAt.IsZero() && a.UsedAt.IsZero() == b.UsedAt.IsZero() && a.MachineID == b.MachineID
}

func testEnrollTokens(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	expires := base.Add(time.Hour)
	team := store.EnrollToken{ID: "e1", Hash: hash("e1"), TeamID: "red", UserID: "alice", CreatedAt: base, ExpiresAt: expires}
	personal := store.EnrollToken{ID: "e2", Hash: hash("e2"), UserID: "bob", CreatedAt: base, ExpiresAt: expires}
	forever := store.EnrollToken{ID: "e3", Hash: hash("e3"), UserID: "bob", CreatedAt: base}
	usedExpired := store.EnrollToken{ID: "e4", Hash: hash("e4"), UserID: "bob", CreatedAt: base, ExpiresAt: expires}
	for _, e := range []store.EnrollToken{team, personal, forever, usedExpired} {
		must(t, s.CreateEnrollToken(ctx, e))
	}
	dup := personal
	dup.ID = "e5"
	if err := s.CreateEnrollToken(ctx, dup); !errors.Is(err, store.ErrExists) {
		t.Errorf("CreateEnrollToken with an existing hash = %v; want ErrExists", err)
	}
	dup = personal
	dup.Hash = hash("e5")
	if err := s.CreateEnrollToken(ctx, dup); !errors.Is(err, store.ErrExists) {
		t.Errorf("CreateEnrollToken with an existing id = %v; want ErrExists", err)
	}

	used := func(e store.EnrollToken, machineID string, at time.Time) store.EnrollToken {
		e.MachineID, e.UsedAt = machineID, at
		return e
	}
	steps := []struct {
		name    string
		hash    []byte
		machine string
		now     time.Time
		want    store.EnrollToken
		err     error
	}{
		{"team token", team.Hash, "m1", base.Add(time.Minute), used(team, "m1", base.Add(time.Minute)), nil},
		{"used", team.Hash, "m2", base.Add(2 * time.Minute), store.EnrollToken{}, store.ErrTokenUsed},
		{"expired at the instant", personal.Hash, "m3", expires, store.EnrollToken{}, store.ErrExpired},
		{"expired", personal.Hash, "m3", expires.Add(time.Minute), store.EnrollToken{}, store.ErrExpired},
		{"just in time", personal.Hash, "m3", expires.Add(-time.Microsecond), used(personal, "m3", expires.Add(-time.Microsecond)), nil},
		{"zero expiry never expires", forever.Hash, "m4", base.AddDate(10, 0, 0), used(forever, "m4", base.AddDate(10, 0, 0)), nil},
		{"unknown", hash("nope"), "m5", base, store.EnrollToken{}, store.ErrNotFound},
		{"used before it expired", usedExpired.Hash, "m6", base, used(usedExpired, "m6", base), nil},
		{"used and expired", usedExpired.Hash, "m7", expires.Add(time.Hour), store.EnrollToken{}, store.ErrTokenUsed},
	}
	for _, st := range steps {
		got, err := s.ConsumeEnrollToken(ctx, st.hash, st.machine, st.now)
		if !errors.Is(err, st.err) || (st.err == nil && !equalEnroll(got, st.want)) {
			t.Errorf("ConsumeEnrollToken(%s) = %+v, %v; want %+v, %v", st.name, got, err, st.want, st.err)
		}
		if st.err == nil { // GetEnrollToken sees the token as used
			if got, err := s.GetEnrollToken(ctx, st.hash); err != nil || !equalEnroll(got, st.want) {
				t.Errorf("GetEnrollToken(%s) after its use = %+v, %v; want %+v", st.name, got, err, st.want)
			}
		}
	}
	if _, err := s.GetEnrollToken(ctx, hash("nope")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetEnrollToken(unknown) = %v; want ErrNotFound", err)
	}
	fresh := store.EnrollToken{ID: "e6", Hash: hash("e6"), UserID: "carol", CreatedAt: base, ExpiresAt: expires}
	must(t, s.CreateEnrollToken(ctx, fresh))
	if got, err := s.GetEnrollToken(ctx, fresh.Hash); err != nil || !equalEnroll(got, fresh) {
		t.Errorf("GetEnrollToken(unused) = %+v, %v; want %+v", got, err, fresh)
	}
}

// testConsumeOnce races consumers of one join token on two Stores (two
// relay replicas, or the relay and the admin CLI): exactly one wins.
func testConsumeOnce(t *testing.T, open Open) {
	ctx := t.Context()
	stores := []store.Store{open(t), open(t)}
	const tokens, racers = 5, 16
	for i := range tokens {
		must(t, stores[0].CreateEnrollToken(ctx, store.EnrollToken{
			ID: fmt.Sprint("e", i), Hash: hash(fmt.Sprint("e", i)), UserID: "alice", ExpiresAt: time.Now().Add(time.Hour),
		}))
	}
	for i := range tokens {
		var (
			wg   sync.WaitGroup
			errs [racers]error
			got  [racers]store.EnrollToken
		)
		start := make(chan struct{})
		for r := range racers {
			wg.Go(func() {
				<-start
				got[r], errs[r] = stores[r%2].ConsumeEnrollToken(ctx, hash(fmt.Sprint("e", i)), fmt.Sprint("m", r), time.Time{})
			})
		}
		close(start)
		wg.Wait()
		winners := 0
		for r, err := range errs {
			switch {
			case err == nil:
				winners++
				if got[r].MachineID != fmt.Sprint("m", r) || got[r].UsedAt.IsZero() {
					t.Errorf("token %d: winner %d got %+v; want machine m%d and UsedAt set", i, r, got[r], r)
				}
			case !errors.Is(err, store.ErrTokenUsed):
				t.Errorf("token %d: racer %d: %v; want success or ErrTokenUsed", i, r, err)
			}
		}
		if winners != 1 {
			t.Errorf("token %d: %d of %d concurrent consumers won; want exactly 1", i, winners, racers)
		}
	}
}
