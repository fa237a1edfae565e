package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
)

// testScopedTokens: a device token and a pairing ticket keep their machine
// and scope through every read (by hash, in lists, when revoked); an
// ordinary token reads back with neither; a scope needs a machine and a
// machine a known scope.
func testScopedTokens(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	ordinary := store.Token{ID: "t1", UserID: "alice", Name: "laptop", Hash: hash("t1"), CreatedAt: base}
	device := store.Token{ID: "t2", UserID: "alice", Name: "device:phone", Hash: hash("t2"), CreatedAt: base.Add(time.Minute),
		MachineID: "m-1", Scope: store.ScopeDevice}
	ticket := store.Token{ID: "t3", UserID: "alice", Name: "pairing", Hash: hash("t3"), CreatedAt: base.Add(2 * time.Minute),
		ExpiresAt: base.Add(12 * time.Minute), MachineID: "m-1", Scope: store.ScopePair}
	for _, tk := range []store.Token{ordinary, device, ticket} {
		must(t, s.CreateToken(ctx, tk))
		if got, err := s.TokenByHash(ctx, tk.Hash); err != nil || !equalToken(got, tk) {
			t.Errorf("TokenByHash(%s) = %+v, %v; want %+v", tk.ID, got, err, tk)
		}
	}
	for _, user := range []string{"alice", ""} {
		list, err := s.ListTokens(ctx, user)
		if err != nil || len(list) != 3 || !equalToken(list[0], ticket) || !equalToken(list[1], device) || !equalToken(list[2], ordinary) {
			t.Errorf("ListTokens(%q) = %+v, %v; want the ticket, the device token, the ordinary one", user, list, err)
		}
	}

	// Revoking keeps the scope, and a reopened store reads it back.
	at := base.Add(time.Hour)
	got, err := s.RevokeToken(ctx, device.ID, at)
	want := device
	want.RevokedAt = at
	if err != nil || !equalToken(got, want) {
		t.Errorf("RevokeToken(device) = %+v, %v; want %+v", got, err, want)
	}
	if got, err := open(t).TokenByHash(ctx, device.Hash); err != nil || !equalToken(got, want) {
		t.Errorf("revoked device token reopened = %+v, %v; want %+v", got, err, want)
	}

	// A share's token (a teammate's, for another user's machine) reads
	// back with its scope and end.
	share := store.Token{ID: "t4", UserID: "bob", Name: "share:sh-1", Hash: hash("t4"), CreatedAt: base,
		ExpiresAt: base.Add(24 * time.Hour), MachineID: "m-1", Scope: store.ScopeShare}
	must(t, s.CreateToken(ctx, share))
	if got, err := s.TokenByHash(ctx, share.Hash); err != nil || !equalToken(got, share) {
		t.Errorf("TokenByHash(share) = %+v, %v; want %+v", got, err, share)
	}

	for name, tk := range map[string]store.Token{
		"scope without machine": {ID: "t8", UserID: "alice", Hash: hash("t8"), Scope: store.ScopeDevice},
		"share without machine": {ID: "t12", UserID: "bob", Hash: hash("t12"), Scope: store.ScopeShare},
		"machine without scope": {ID: "t9", UserID: "alice", Hash: hash("t9"), MachineID: "m-1"},
		"unknown scope":         {ID: "t10", UserID: "alice", Hash: hash("t10"), MachineID: "m-1", Scope: "admin"},
		"bad machine id":        {ID: "t11", UserID: "alice", Hash: hash("t11"), MachineID: "m\x00", Scope: store.ScopePair},
	} {
		if err := s.CreateToken(ctx, tk); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("CreateToken %s = %v; want ErrInvalid", name, err)
		}
	}
}

// testSpendToken: a single-use token is spent (revoked) once, at the time
// given; a spent, revoked, expired or unknown one is refused with an error
// that says which; of many concurrent spenders on two stores (two
// replicas) exactly one wins.
func testSpendToken(t *testing.T, open Open) {
	ctx := t.Context()
	s, other := open(t), open(t)
	ticket := func(id string, expires time.Time) store.Token {
		return store.Token{ID: id, UserID: "alice", Name: "pairing", Hash: hash(id), CreatedAt: base,
			ExpiresAt: expires, MachineID: "m-1", Scope: store.ScopePair}
	}
	live, expired, revoked := ticket("p1", base.Add(10*time.Minute)), ticket("p2", base.Add(time.Minute)), ticket("p3", base.Add(10*time.Minute))
	for _, tk := range []store.Token{live, expired, revoked} {
		must(t, s.CreateToken(ctx, tk))
	}
	if _, err := s.RevokeToken(ctx, revoked.ID, base); err != nil {
		t.Fatal(err)
	}
	now := base.Add(5 * time.Minute)
	got, err := s.SpendToken(ctx, live.ID, now)
	want := live
	want.RevokedAt = now
	if err != nil || !equalToken(got, want) {
		t.Errorf("SpendToken(live) = %+v, %v; want %+v", got, err, want)
	}
	for _, tc := range []struct {
		name, id string
		want     error
	}{
		{"spent", live.ID, store.ErrTokenSpent},
		{"revoked", revoked.ID, store.ErrTokenSpent},
		{"expired", expired.ID, store.ErrExpired},
		{"unknown", "nope", store.ErrNotFound},
	} {
		if _, err := other.SpendToken(ctx, tc.id, now.Add(time.Second)); !errors.Is(err, tc.want) {
			t.Errorf("SpendToken(%s) = %v; want %v", tc.name, err, tc.want)
		}
	}
	if got, err := s.TokenByHash(ctx, live.Hash); err != nil || !sameTime(got.RevokedAt, now) {
		t.Errorf("a refused spend changed the spent token: %+v, %v; want revoked at %v", got, err, now)
	}
	if got, err := s.TokenByHash(ctx, expired.Hash); err != nil || !got.RevokedAt.IsZero() {
		t.Errorf("a refused spend revoked the expired token: %+v, %v", got, err)
	}

	const tickets, racers = 5, 8
	for i := range tickets {
		must(t, s.CreateToken(ctx, ticket(fmt.Sprint("r", i), time.Now().Add(time.Hour))))
	}
	stores := []store.Store{s, other}
	for i := range tickets {
		var (
			wg   sync.WaitGroup
			errs [racers]error
		)
		start := make(chan struct{})
		for r := range racers {
			wg.Go(func() {
				<-start
				_, errs[r] = stores[r%2].SpendToken(ctx, fmt.Sprint("r", i), time.Time{})
			})
		}
		close(start)
		wg.Wait()
		winners := 0
		for r, err := range errs {
			switch {
			case err == nil:
				winners++
			case !errors.Is(err, store.ErrTokenSpent):
				t.Errorf("ticket %d: racer %d: %v; want success or ErrTokenSpent", i, r, err)
			}
		}
		if winners != 1 {
			t.Errorf("ticket %d: %d of %d concurrent spenders won; want exactly 1", i, winners, racers)
		}
	}
	list, err := s.ListTokens(ctx, "alice")
	if err != nil || slices.ContainsFunc(list, func(tk store.Token) bool { return tk.Live(time.Now()) }) {
		t.Errorf("after spending every ticket, ListTokens(alice) = %+v, %v; want none live", list, err)
	}
}
