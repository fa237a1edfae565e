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

// revocations returns s's revoked machines and serials, failing on error.
func revocations(t *testing.T, s store.Store) (machines, serials []string) {
	t.Helper()
	machines, serials, err := s.Revocations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return machines, serials
}

func testRevocation(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	for _, id := range []string{"m1", "m2"} {
		must(t, s.UpsertMachine(ctx, machine(id, "alice")))
	}
	notAfter := base.Add(30 * 24 * time.Hour)
	must(t, s.RecordCertificate(ctx, "m1", "0a", notAfter))
	must(t, s.RecordCertificate(ctx, "m1", "0b", notAfter))
	must(t, s.RecordCertificate(ctx, "m1", "0b", notAfter.Add(time.Hour))) // renewal of the record: fine
	must(t, s.RecordCertificate(ctx, "m2", "ff01", notAfter))
	if err := s.RecordCertificate(ctx, "m2", "0a", notAfter); !errors.Is(err, store.ErrExists) {
		t.Errorf("RecordCertificate(m2, m1's serial) = %v; want ErrExists", err)
	}
	if m, sn := revocations(t, s); len(m) != 0 || len(sn) != 0 {
		t.Fatalf("Revocations before any = %v, %v; want none", m, sn)
	}

	first := base.Add(time.Hour)
	must(t, s.RevokeMachine(ctx, "m1", first))
	must(t, s.RevokeMachine(ctx, "m1", first.Add(time.Hour))) // keeps the first time
	must(t, s.RevokeMachine(ctx, "ghost", first))             // unknown: recorded anyway
	machines, serials := revocations(t, s)
	if !slices.Equal(machines, []string{"ghost", "m1"}) || !slices.Equal(serials, []string{"0a", "0b"}) {
		t.Errorf("Revocations = %v, %v; want [ghost m1], [0a 0b]", machines, serials)
	}
	if got, err := s.GetMachine(ctx, "m1"); err != nil || !sameTime(got.RevokedAt, first) {
		t.Errorf("GetMachine(m1).RevokedAt = %v, %v; want %v", got.RevokedAt, err, first)
	}
	if got, err := s.GetMachine(ctx, "m2"); err != nil || !got.RevokedAt.IsZero() {
		t.Errorf("GetMachine(m2).RevokedAt = %v, %v; want zero", got.RevokedAt, err)
	}

	// A certificate recorded after the revocation (an enrollment that
	// raced it) is revoked too.
	must(t, s.RecordCertificate(ctx, "m1", "0c", notAfter))
	if _, serials := revocations(t, s); !slices.Equal(serials, []string{"0a", "0b", "0c"}) {
		t.Errorf("after a late certificate Revocations serials = %v; want [0a 0b 0c]", serials)
	}

	// A revoked machine cannot register again, is not listed, but is still
	// in AllMachines; the others are unaffected.
	for _, id := range []string{"m1", "ghost"} {
		if err := s.UpsertMachine(ctx, machine(id, "alice")); !errors.Is(err, store.ErrRevoked) {
			t.Errorf("UpsertMachine(revoked %s) = %v; want ErrRevoked", id, err)
		}
	}
	if list, err := s.ListMachines(ctx, "alice"); err != nil || !slices.Equal(machineIDs(list), []string{"m2"}) {
		t.Errorf("ListMachines(alice) = %v, %v; want m2 (m1 revoked)", machineIDs(list), err)
	}
	all, err := s.AllMachines(ctx)
	if err != nil || !slices.Equal(machineIDs(all), []string{"m1", "m2"}) || all[0].RevokedAt.IsZero() {
		t.Errorf("AllMachines = %+v, %v; want m1 (revoked), m2", all, err)
	}
	must(t, s.UpsertMachine(ctx, machine("m2", "alice")))
}

func testDeleteMachine(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	for _, m := range []store.Machine{machine("m1", "alice"), machine("m2", "alice")} {
		must(t, s.UpsertMachine(ctx, m))
	}
	must(t, s.RecordCertificate(ctx, "m1", "01", base.Add(time.Hour)))
	for _, user := range []string{"alice", "bob"} {
		if _, err := s.SetCurrentMachine(ctx, user, "m1"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SetCurrentMachine(ctx, "carol", "m2"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		enqueue(t, s, message("m1", k, "payload"), store.Limits{})
	}
	kept := enqueue(t, s, message("m2", "a", "payload"), store.Limits{})

	must(t, s.DeleteMachine(ctx, "m1", base))
	if _, err := s.GetMachine(ctx, "m1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetMachine after DeleteMachine = %v; want ErrNotFound", err)
	}
	if got := pending(t, s, "m1", 0, 10); len(got) != 0 {
		t.Errorf("Pending after DeleteMachine = %v; want none", ids(got))
	}
	if n, b, err := s.Counts(ctx, "m1"); err != nil || n != 0 || b != 0 {
		t.Errorf("Counts after DeleteMachine = %d, %d, %v; want 0, 0", n, b, err)
	}
	for user, want := range map[string]string{"alice": "", "bob": "", "carol": "m2"} {
		if got, err := s.CurrentMachine(ctx, user); err != nil || got != want {
			t.Errorf("CurrentMachine(%s) after DeleteMachine(m1) = %q, %v; want %q", user, got, err, want)
		}
	}
	if got := pending(t, s, "m2", 0, 10); len(got) != 1 || got[0].ID != kept.ID {
		t.Errorf("Pending(m2) = %v; want the other machine's message %d kept", ids(got), kept.ID)
	}
	machines, serials := revocations(t, s)
	if !slices.Equal(machines, []string{"m1"}) || !slices.Equal(serials, []string{"01"}) {
		t.Errorf("Revocations after DeleteMachine = %v, %v; want [m1], [01]", machines, serials)
	}
	if err := s.UpsertMachine(ctx, machine("m1", "alice")); !errors.Is(err, store.ErrRevoked) {
		t.Errorf("UpsertMachine(deleted m1) = %v; want ErrRevoked", err)
	}
	if err := s.DeleteMachine(ctx, "m1", base); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteMachine(m1) twice = %v; want ErrNotFound", err)
	}
	if err := s.DeleteMachine(ctx, "nope", base); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteMachine(nope) = %v; want ErrNotFound", err)
	}
	if machines, _ := revocations(t, s); !slices.Equal(machines, []string{"m1"}) {
		t.Errorf("a failed DeleteMachine(nope) recorded a revocation: %v", machines)
	}
	// The buffer's accounting starts afresh for the id.
	enqueue(t, s, message("m1", "a", "again"), store.Limits{MaxMessages: 1})
	if n, _, err := s.Counts(ctx, "m1"); err != nil || n != 1 {
		t.Errorf("Counts after a new Enqueue = %d, %v; want 1", n, err)
	}
}

// testRevokeRaces revokes machines while another Store (another replica)
// registers them and records their certificates. Whatever the order, a
// revoked machine never ends up live: its row, if any, is marked revoked,
// and every certificate recorded for it is revoked.
func testRevokeRaces(t *testing.T, open Open) {
	ctx := t.Context()
	a, b := open(t), open(t)
	const machines = 40
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		serials []string // recorded successfully
	)
	errs := make(chan error, 3*machines)
	for i := range machines {
		id, serial := fmt.Sprintf("m%02d", i), fmt.Sprintf("%04x", i)
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			if err := b.UpsertMachine(ctx, machine(id, "alice")); err != nil && !errors.Is(err, store.ErrRevoked) {
				errs <- err
			}
		})
		wg.Go(func() {
			<-start
			if err := b.RecordCertificate(ctx, id, serial, base); err != nil {
				errs <- err
				return
			}
			mu.Lock()
			serials = append(serials, serial)
			mu.Unlock()
		})
		wg.Go(func() {
			<-start
			if err := a.RevokeMachine(ctx, id, base); err != nil {
				errs <- err
			}
		})
		close(start)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	all, err := a.AllMachines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.RevokedAt.IsZero() {
			t.Errorf("machine %s was revoked but its row is live", m.ID)
		}
	}
	revokedMachines, revokedSerials := revocations(t, a)
	if len(revokedMachines) != machines {
		t.Errorf("%d machines revoked; want %d", len(revokedMachines), machines)
	}
	slices.Sort(serials)
	if !slices.Equal(revokedSerials, serials) {
		t.Errorf("revoked serials = %v; want every recorded one, %v", revokedSerials, serials)
	}
	if list, err := a.ListMachines(ctx, "alice"); err != nil || len(list) != 0 {
		t.Errorf("ListMachines(alice) = %v, %v; want none", machineIDs(list), err)
	}
}
