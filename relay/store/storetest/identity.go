package storetest

import (
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
)

// identityTests are the store.Identity behaviours, run by Run.
var identityTests = []struct {
	name string
	f    func(t *testing.T, open Open)
}{
	{"Users", testUsers},
	{"TeamsAndMembers", testTeams},
	{"TeamMachines", testTeamMachines},
	{"Tokens", testTokens},
	{"ScopedTokens", testScopedTokens},
	{"SpendToken", testSpendToken},
	{"EnrollTokens", testEnrollTokens},
	{"EnrollTokenConsumedOnce", testConsumeOnce},
	{"Revocation", testRevocation},
	{"RevokeRaces", testRevokeRaces},
	{"DeleteMachine", testDeleteMachine},
	{"Audit", testAudit},
	{"Watch", testWatch},
	{"WatchBurst", testWatchBurst},
	{"IdentityInvalidArguments", testIdentityInvalid},
}

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// hash is the SHA-256 of s, a stand-in for a token's hash.
func hash(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func testUsers(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	alice := store.User{ID: "alice", Email: "alice@example.com", Admin: true, CreatedAt: base}
	bob := store.User{ID: "bob"} // zero CreatedAt: now
	before := time.Now().Add(-time.Second)
	for _, u := range []store.User{bob, alice} {
		must(t, s.CreateUser(ctx, u))
	}
	if err := s.CreateUser(ctx, store.User{ID: "alice", Email: "other"}); !errors.Is(err, store.ErrExists) {
		t.Errorf("CreateUser(alice again) = %v; want ErrExists", err)
	}
	got, err := s.GetUser(ctx, "alice")
	if err != nil || got.ID != "alice" || got.Email != alice.Email || !got.Admin || got.Disabled || !sameTime(got.CreatedAt, base) {
		t.Errorf("GetUser(alice) = %+v, %v; want %+v", got, err, alice)
	}
	if got, err := s.GetUser(ctx, "bob"); err != nil || got.Admin || got.CreatedAt.Before(before) {
		t.Errorf("GetUser(bob) = %+v, %v; want a non-admin created now", got, err)
	}
	if _, err := s.GetUser(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetUser(nobody) = %v; want ErrNotFound", err)
	}
	list, err := s.ListUsers(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "alice" || list[1].ID != "bob" {
		t.Errorf("ListUsers = %+v, %v; want alice, bob", list, err)
	}

	for _, disabled := range []bool{true, false, true} {
		must(t, s.SetUserDisabled(ctx, "bob", disabled))
		if got, err := s.GetUser(ctx, "bob"); err != nil || got.Disabled != disabled {
			t.Errorf("after SetUserDisabled(bob, %v) GetUser = %+v, %v", disabled, got, err)
		}
	}
	if err := s.SetUserDisabled(ctx, "nobody", true); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetUserDisabled(nobody) = %v; want ErrNotFound", err)
	}
}

func testTeams(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	for _, id := range []string{"alice", "bob", "carol"} {
		must(t, s.CreateUser(ctx, store.User{ID: id}))
	}
	must(t, s.CreateTeam(ctx, store.Team{ID: "red", CreatedAt: base}))
	must(t, s.CreateTeam(ctx, store.Team{ID: "blue"}))
	if err := s.CreateTeam(ctx, store.Team{ID: "red"}); !errors.Is(err, store.ErrExists) {
		t.Errorf("CreateTeam(red again) = %v; want ErrExists", err)
	}
	if got, err := s.GetTeam(ctx, "red"); err != nil || got.ID != "red" || !sameTime(got.CreatedAt, base) {
		t.Errorf("GetTeam(red) = %+v, %v", got, err)
	}
	if _, err := s.GetTeam(ctx, "green"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetTeam(green) = %v; want ErrNotFound", err)
	}
	if list, err := s.ListTeams(ctx); err != nil || len(list) != 2 || list[0].ID != "blue" || list[1].ID != "red" {
		t.Errorf("ListTeams = %+v, %v; want blue, red", list, err)
	}

	steps := []struct {
		name string
		m    store.Member
		want error
	}{
		{"owner", store.Member{TeamID: "red", UserID: "alice", Role: store.RoleOwner, AddedAt: base}, nil},
		{"member", store.Member{TeamID: "red", UserID: "carol", Role: store.RoleMember, AddedAt: base}, nil},
		{"admin of another team", store.Member{TeamID: "blue", UserID: "alice", Role: store.RoleAdmin}, nil},
		{"role change", store.Member{TeamID: "red", UserID: "carol", Role: store.RoleAdmin, AddedAt: base.Add(time.Hour)}, nil},
		{"unknown team", store.Member{TeamID: "green", UserID: "bob", Role: store.RoleMember}, store.ErrNotFound},
		{"unknown user", store.Member{TeamID: "red", UserID: "dave", Role: store.RoleMember}, store.ErrNotFound},
		{"invalid role", store.Member{TeamID: "red", UserID: "bob", Role: "king"}, store.ErrInvalid},
		{"empty role", store.Member{TeamID: "red", UserID: "bob"}, store.ErrInvalid},
	}
	for _, st := range steps {
		if err := s.SetMember(ctx, st.m); !errors.Is(err, st.want) {
			t.Errorf("SetMember(%s) = %v; want %v", st.name, err, st.want)
		}
	}
	members, err := s.Members(ctx, "red")
	want := []store.Member{
		{TeamID: "red", UserID: "alice", Role: store.RoleOwner, AddedAt: base},
		{TeamID: "red", UserID: "carol", Role: store.RoleAdmin, AddedAt: base}, // a role change keeps AddedAt
	}
	if err != nil || !slices.EqualFunc(members, want, equalMember) {
		t.Errorf("Members(red) = %+v, %v; want %+v", members, err, want)
	}
	ms, err := s.Memberships(ctx, "alice")
	if err != nil || len(ms) != 2 || ms[0].TeamID != "blue" || ms[0].Role != store.RoleAdmin || ms[1].TeamID != "red" || ms[1].Role != store.RoleOwner {
		t.Fatalf("Memberships(alice) = %+v, %v; want blue admin, red owner", ms, err)
	}
	if ms[0].AddedAt.IsZero() {
		t.Error("a zero AddedAt was not set to now")
	}
	if ms, err := s.Memberships(ctx, "bob"); err != nil || len(ms) != 0 {
		t.Errorf("Memberships(bob) = %+v, %v; want none", ms, err)
	}

	must(t, s.RemoveMember(ctx, "red", "carol"))
	if err := s.RemoveMember(ctx, "red", "carol"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RemoveMember(red, carol) twice = %v; want ErrNotFound", err)
	}
	if err := s.RemoveMember(ctx, "red", "bob"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RemoveMember(red, bob), not a member = %v; want ErrNotFound", err)
	}
	if members, err := s.Members(ctx, "red"); err != nil || len(members) != 1 || members[0].UserID != "alice" {
		t.Errorf("after RemoveMember Members(red) = %+v, %v; want alice", members, err)
	}
}

func equalMember(a, b store.Member) bool {
	return a.TeamID == b.TeamID && a.UserID == b.UserID && a.Role == b.Role && sameTime(a.AddedAt, b.AddedAt)
}

// teamMachine is machine id of team teamID, enrolled by user by.
func teamMachine(id, teamID, by string) store.Machine {
	m := machine(id, by)
	m.TeamID = teamID
	return m
}

func testTeamMachines(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	for _, id := range []string{"alice", "bob", "carol"} {
		must(t, s.CreateUser(ctx, store.User{ID: id}))
	}
	for _, id := range []string{"red", "blue"} {
		must(t, s.CreateTeam(ctx, store.Team{ID: id}))
	}
	must(t, s.SetMember(ctx, store.Member{TeamID: "red", UserID: "alice", Role: store.RoleOwner}))
	must(t, s.SetMember(ctx, store.Member{TeamID: "red", UserID: "bob", Role: store.RoleMember}))
	must(t, s.SetMember(ctx, store.Member{TeamID: "blue", UserID: "carol", Role: store.RoleOwner}))
	for _, m := range []store.Machine{
		machine("a1", "alice"),
		machine("b1", "bob"),
		teamMachine("r1", "red", "alice"),
		teamMachine("r2", "red", "bob"),
		teamMachine("x1", "blue", "alice"), // alice enrolled it, but is not in blue
		teamMachine("r3", "red", "carol"),  // revoked below
	} {
		must(t, s.UpsertMachine(ctx, m))
	}
	must(t, s.RevokeMachine(ctx, "r3", base))

	tests := []struct {
		user string
		want []string
	}{
		{"alice", []string{"a1", "r1", "r2"}},
		{"bob", []string{"b1", "r1", "r2"}},
		{"carol", []string{"x1"}},
		{"dave", nil},
	}
	for _, tt := range tests {
		list, err := s.ListMachines(ctx, tt.user)
		if err != nil || !slices.Equal(machineIDs(list), tt.want) {
			t.Errorf("ListMachines(%s) = %v, %v; want %v", tt.user, machineIDs(list), err, tt.want)
		}
	}
	if got, err := s.GetMachine(ctx, "r1"); err != nil || !equalMachine(got, teamMachine("r1", "red", "alice")) {
		t.Errorf("GetMachine(r1) = %+v, %v; want team red's", got, err)
	}

	// Membership changes move team machines in and out of a user's list.
	must(t, s.RemoveMember(ctx, "red", "bob"))
	if list, err := s.ListMachines(ctx, "bob"); err != nil || !slices.Equal(machineIDs(list), []string{"b1"}) {
		t.Errorf("after leaving red ListMachines(bob) = %v, %v; want b1", machineIDs(list), err)
	}

	// A registration may not move a machine between owners or teams.
	conflicts := []struct {
		name string
		m    store.Machine
	}{
		{"team machine as personal", machine("r1", "alice")},
		{"team machine to another team", teamMachine("r1", "blue", "alice")},
		{"team machine by another user", teamMachine("r1", "red", "bob")},
		{"personal machine into a team", teamMachine("a1", "red", "alice")},
	}
	for _, c := range conflicts {
		if err := s.UpsertMachine(ctx, c.m); !errors.Is(err, store.ErrConflict) {
			t.Errorf("UpsertMachine(%s) = %v; want ErrConflict", c.name, err)
		}
	}
	again := teamMachine("r1", "red", "alice")
	again.Version = "9.9.9"
	must(t, s.UpsertMachine(ctx, again))
	if got, _ := s.GetMachine(ctx, "r1"); got.Version != "9.9.9" || got.TeamID != "red" {
		t.Errorf("after re-registration GetMachine(r1) = %+v; want version 9.9.9 in team red", got)
	}
}

func machineIDs(ms []store.Machine) []string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

func testIdentityInvalid(t *testing.T, open Open) {
	ctx := t.Context()
	s := open(t)
	must(t, s.CreateUser(ctx, store.User{ID: "alice"}))
	must(t, s.CreateTeam(ctx, store.Team{ID: "red"}))
	calls := []struct {
		name string
		call func() error
	}{
		{"CreateUser without id", func() error { return s.CreateUser(ctx, store.User{}) }},
		{"CreateUser NUL id", func() error { return s.CreateUser(ctx, store.User{ID: "a\x00"}) }},
		{"CreateUser invalid email", func() error { return s.CreateUser(ctx, store.User{ID: "u", Email: "\xff"}) }},
		{"CreateTeam without id", func() error { return s.CreateTeam(ctx, store.Team{}) }},
		{"SetMember without team", func() error {
			return s.SetMember(ctx, store.Member{UserID: "alice", Role: store.RoleMember})
		}},
		{"SetMember without user", func() error {
			return s.SetMember(ctx, store.Member{TeamID: "red", Role: store.RoleMember})
		}},
		{"CreateToken without id", func() error {
			return s.CreateToken(ctx, store.Token{UserID: "alice", Hash: hash("x")})
		}},
		{"CreateToken without user", func() error {
			return s.CreateToken(ctx, store.Token{ID: "t", Hash: hash("x")})
		}},
		{"CreateToken short hash", func() error {
			return s.CreateToken(ctx, store.Token{ID: "t", UserID: "alice", Hash: []byte("secret")})
		}},
		{"CreateToken invalid name", func() error {
			return s.CreateToken(ctx, store.Token{ID: "t", UserID: "alice", Name: "\xff", Hash: hash("x")})
		}},
		{"TokenByHash short hash", func() error { _, err := s.TokenByHash(ctx, []byte("x")); return err }},
		{"TouchToken invalid address", func() error { return s.TouchToken(ctx, "t", base, "\x00") }},
		{"CreateEnrollToken without hash", func() error {
			return s.CreateEnrollToken(ctx, store.EnrollToken{ID: "e", UserID: "alice"})
		}},
		{"CreateEnrollToken without user", func() error {
			return s.CreateEnrollToken(ctx, store.EnrollToken{ID: "e", Hash: hash("e")})
		}},
		{"ConsumeEnrollToken without machine", func() error {
			_, err := s.ConsumeEnrollToken(ctx, hash("e"), "", base)
			return err
		}},
		{"ConsumeEnrollToken short hash", func() error {
			_, err := s.ConsumeEnrollToken(ctx, nil, "m1", base)
			return err
		}},
		{"RecordCertificate upper-case serial", func() error { return s.RecordCertificate(ctx, "m1", "0A", base) }},
		{"RecordCertificate empty serial", func() error { return s.RecordCertificate(ctx, "m1", "", base) }},
		{"RecordCertificate without machine", func() error { return s.RecordCertificate(ctx, "", "0a", base) }},
		{"RevokeMachine without id", func() error { return s.RevokeMachine(ctx, "", base) }},
		{"DeleteMachine without id", func() error { return s.DeleteMachine(ctx, "", base) }},
		{"AppendAudit without action", func() error { return s.AppendAudit(ctx, store.AuditEvent{Actor: "alice"}) }},
		{"AppendAudit invalid detail", func() error {
			return s.AppendAudit(ctx, store.AuditEvent{Action: "x", Detail: "\xff"})
		}},
		{"ListAudit negative limit", func() error { _, err := s.ListAudit(ctx, store.AuditFilter{Limit: -1}); return err }},
		{"UpsertMachine invalid team", func() error { return s.UpsertMachine(ctx, teamMachine("m1", "\xff", "alice")) }},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s = %v; want ErrInvalid", c.name, err)
		}
	}
	if users, err := s.ListUsers(ctx); err != nil || len(users) != 1 {
		t.Errorf("after invalid calls ListUsers = %+v, %v; want alice only", users, err)
	}
}
