package admin_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/admin"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	"github.com/betcode-dev/betcode/shared/authtoken"
)

// The role matrix's actors. The fixture (newFixture) makes:
//
//	users  root (relay administrator), owner, tadmin, member, outsider,
//	       off (disabled), other
//	teams  t1: owner (owner), tadmin (admin), member (member)
//	       t2: other (owner)
//	machines m-t1 (team t1), m-t2 (team t2), m-member (member's own),
//	       m-outsider (outsider's own)
//	tokens one client token of member (fixture.memberToken)
var actors = map[string]admin.Actor{
	"admin":    {UserID: "root", Admin: true, Remote: "192.0.2.1:1000"},
	"owner":    {UserID: "owner", Remote: "192.0.2.2:1000"},
	"tadmin":   {UserID: "tadmin", Remote: "192.0.2.3:1000"},
	"member":   {UserID: "member", Remote: "192.0.2.4:1000"},
	"outsider": {UserID: "outsider", Remote: "192.0.2.5:1000"},
	"disabled": {UserID: "off", Remote: "192.0.2.6:1000"},
	"cli":      admin.CLI(),
}

// actorNames lists actors in a fixed order.
var actorNames = []string{"admin", "owner", "tadmin", "member", "outsider", "disabled", "cli"}

type fixture struct {
	ops         *admin.Ops
	st          store.Store
	now         time.Time
	memberToken string // public id of member's token
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC().Truncate(time.Millisecond)
	f := &fixture{
		st:  st,
		now: now,
		ops: &admin.Ops{Store: st, Now: func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(t.Output(), nil))},
	}
	cli := admin.CLI()
	for _, u := range []store.User{{ID: "root", Admin: true}, {ID: "owner"}, {ID: "tadmin"}, {ID: "member"}, {ID: "outsider"}, {ID: "off"}, {ID: "other"}} {
		f.must(t)(f.ops.CreateUser(ctx, cli, u))
	}
	f.must(t)(f.ops.CreateTeam(ctx, cli, "t1", "owner"))
	f.must(t)(f.ops.CreateTeam(ctx, cli, "t2", "other"))
	f.must(t)(f.ops.AddMember(ctx, cli, "t1", "tadmin", store.RoleAdmin))
	f.must(t)(f.ops.AddMember(ctx, cli, "t1", "member", ""))
	f.must(t)(f.ops.AddMember(ctx, cli, "t1", "off", store.RoleOwner))
	f.must(t)(f.ops.DisableUser(ctx, cli, "off", true))
	for _, m := range []store.Machine{
		{ID: "m-t1", OwnerID: "owner", TeamID: "t1", Name: "build box"},
		{ID: "m-t2", OwnerID: "other", TeamID: "t2"},
		{ID: "m-member", OwnerID: "member"},
		{ID: "m-outsider", OwnerID: "outsider"},
	} {
		if err := st.UpsertMachine(ctx, m); err != nil {
			t.Fatalf("upsert machine %s: %v", m.ID, err)
		}
	}
	_, tok, err := f.ops.CreateToken(ctx, cli, "member", "laptop", 0)
	if err != nil {
		t.Fatal(err)
	}
	f.memberToken = tok.ID
	return f
}

// must fails the test on a fixture step's error.
func (f *fixture) must(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("fixture: %v", err)
		}
	}
}

const (
	ok = codes.OK
	nf = codes.NotFound
	pd = codes.PermissionDenied
	ia = codes.InvalidArgument
	fp = codes.FailedPrecondition
)

// TestRoleMatrix runs each operation as each actor on a fresh fixture and
// checks the status code, and that the audit log records the outcome: a
// refusal as access.denied, a change as its action.
func TestRoleMatrix(t *testing.T) {
	type call func(ctx context.Context, f *fixture, a admin.Actor) error
	cases := []struct {
		name string
		call call
		// action is the audit action of a successful change ("" for reads).
		action string
		want   map[string]codes.Code
	}{
		{
			name: "CreateUser",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, err := f.ops.CreateUser(ctx, a, store.User{ID: "newbie"})
				return err
			},
			action: admin.ActionUserCreated,
			want:   map[string]codes.Code{"admin": ok, "owner": pd, "tadmin": pd, "member": pd, "outsider": pd, "disabled": pd, "cli": ok},
		},
		{
			name: "ListUsers",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, err := f.ops.ListUsers(ctx, a)
				return err
			},
			want: map[string]codes.Code{"admin": ok, "owner": pd, "tadmin": pd, "member": pd, "outsider": pd, "disabled": pd, "cli": ok},
		},
		{
			name: "DisableUser",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, err := f.ops.DisableUser(ctx, a, "outsider", true)
				return err
			},
			action: admin.ActionUserDisabled,
			want:   map[string]codes.Code{"admin": ok, "owner": pd, "tadmin": pd, "member": pd, "outsider": pd, "disabled": pd, "cli": ok},
		},
		{
			name: "CreateTeam",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, err := f.ops.CreateTeam(ctx, a, "t3", "outsider")
				return err
			},
			action: admin.ActionTeamCreated,
			want:   map[string]codes.Code{"admin": ok, "owner": pd, "tadmin": pd, "member": pd, "outsider": pd, "disabled": pd, "cli": ok},
		},
		{
			name: "ListTeams",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, err := f.ops.ListTeams(ctx, a)
				return err
			},
			want: map[string]codes.Code{"admin": ok, "owner": ok, "tadmin": ok, "member": ok, "outsider": ok, "disabled": pd, "cli": ok},
		},
		{
			name: "AddMember/member",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, err := f.ops.AddMember(ctx, a, "t1", "outsider", store.RoleMember)
				return err
			},
			action: admin.ActionMemberAdded,
			want:   map[string]codes.Code{"admin": ok, "owner": ok, "tadmin": ok, "member": pd, "outsider": nf, "disabled": pd, "cli": ok},
		},
		{
			name: "AddMember/owner",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, err := f.ops.AddMember(ctx, a, "t1", "outsider", store.RoleOwner)
				return err
			},
			action: admin.ActionMemberAdded,
			want:   map[string]codes.Code{"admin": ok, "owner": ok, "tadmin": pd, "member": pd, "outsider": nf, "disabled": pd, "cli": ok},
		},
		{
			name: "AddMember/other team",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, err := f.ops.AddMember(ctx, a, "t2", "outsider", store.RoleMember)
				return err
			},
			action: admin.ActionMemberAdded,
			want:   map[string]codes.Code{"admin": ok, "owner": nf, "tadmin": nf, "member": nf, "outsider": nf, "disabled": pd, "cli": ok},
		},
		{
			name: "AddMember/no such team",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, err := f.ops.AddMember(ctx, a, "nope", "outsider", store.RoleMember)
				return err
			},
			action: admin.ActionMemberAdded,
			want:   map[string]codes.Code{"admin": nf, "owner": nf, "tadmin": nf, "member": nf, "outsider": nf, "disabled": pd, "cli": nf},
		},
		{
			name: "RemoveMember/member",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				return f.ops.RemoveMember(ctx, a, "t1", "member")
			},
			action: admin.ActionMemberRemoved,
			want:   map[string]codes.Code{"admin": ok, "owner": ok, "tadmin": ok, "member": pd, "outsider": nf, "disabled": pd, "cli": ok},
		},
		{
			name: "RemoveMember/owner",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				return f.ops.RemoveMember(ctx, a, "t1", "off")
			},
			action: admin.ActionMemberRemoved,
			want:   map[string]codes.Code{"admin": ok, "owner": ok, "tadmin": pd, "member": pd, "outsider": nf, "disabled": pd, "cli": ok},
		},
		{
			name: "CreateToken/self",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, _, err := f.ops.CreateToken(ctx, a, "", "phone", time.Hour)
				return err
			},
			action: admin.ActionTokenCreated,
			want:   map[string]codes.Code{"admin": ok, "owner": ok, "tadmin": ok, "member": ok, "outsider": ok, "disabled": pd, "cli": ia},
		},
		{
			name: "CreateToken/for member",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, _, err := f.ops.CreateToken(ctx, a, "member", "phone", time.Hour)
				return err
			},
			action: admin.ActionTokenCreated,
			want:   map[string]codes.Code{"admin": ok, "owner": pd, "tadmin": pd, "member": ok, "outsider": pd, "disabled": pd, "cli": ok},
		},
		{
			name: "ListTokens/member",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, err := f.ops.ListTokens(ctx, a, "member")
				return err
			},
			want: map[string]codes.Code{"admin": ok, "owner": pd, "tadmin": pd, "member": ok, "outsider": pd, "disabled": pd, "cli": ok},
		},
		{
			name: "ListTokens/all",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, err := f.ops.ListTokens(ctx, a, admin.AllUsers)
				return err
			},
			want: map[string]codes.Code{"admin": ok, "owner": pd, "tadmin": pd, "member": pd, "outsider": pd, "disabled": pd, "cli": ok},
		},
		{
			name: "RevokeToken/member's",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, err := f.ops.RevokeToken(ctx, a, f.memberToken)
				return err
			},
			action: admin.ActionTokenRevoked,
			want:   map[string]codes.Code{"admin": ok, "owner": nf, "tadmin": nf, "member": ok, "outsider": nf, "disabled": pd, "cli": ok},
		},
		{
			name: "RevokeToken/unknown",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, err := f.ops.RevokeToken(ctx, a, "000000000000")
				return err
			},
			action: admin.ActionTokenRevoked,
			want:   map[string]codes.Code{"admin": nf, "owner": nf, "tadmin": nf, "member": nf, "outsider": nf, "disabled": pd, "cli": nf},
		},
		{
			name: "CreateEnrollToken/team",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, _, err := f.ops.CreateEnrollToken(ctx, a, "t1", "", 0)
				return err
			},
			action: admin.ActionEnrollTokenCreate,
			want:   map[string]codes.Code{"admin": ok, "owner": ok, "tadmin": ok, "member": pd, "outsider": nf, "disabled": pd, "cli": ok},
		},
		{
			name: "CreateEnrollToken/other team",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, _, err := f.ops.CreateEnrollToken(ctx, a, "t2", "", 0)
				return err
			},
			action: admin.ActionEnrollTokenCreate,
			want:   map[string]codes.Code{"admin": ok, "owner": nf, "tadmin": nf, "member": nf, "outsider": nf, "disabled": pd, "cli": ok},
		},
		{
			name: "CreateEnrollToken/self",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, _, err := f.ops.CreateEnrollToken(ctx, a, "", "", 0)
				return err
			},
			action: admin.ActionEnrollTokenCreate,
			want:   map[string]codes.Code{"admin": ok, "owner": ok, "tadmin": ok, "member": ok, "outsider": ok, "disabled": pd, "cli": ia},
		},
		{
			name: "CreateEnrollToken/for member",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, _, err := f.ops.CreateEnrollToken(ctx, a, "", "member", 0)
				return err
			},
			action: admin.ActionEnrollTokenCreate,
			want:   map[string]codes.Code{"admin": ok, "owner": pd, "tadmin": pd, "member": ok, "outsider": pd, "disabled": pd, "cli": ok},
		},
		{
			name: "ListMachines",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, err := f.ops.ListMachines(ctx, a)
				return err
			},
			want: map[string]codes.Code{"admin": ok, "owner": ok, "tadmin": ok, "member": ok, "outsider": ok, "disabled": pd, "cli": ok},
		},
		{
			name: "RevokeMachine/team",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				return f.ops.RevokeMachine(ctx, a, "m-t1")
			},
			action: admin.ActionMachineRevoked,
			want:   map[string]codes.Code{"admin": ok, "owner": ok, "tadmin": ok, "member": pd, "outsider": nf, "disabled": pd, "cli": ok},
		},
		{
			name: "RevokeMachine/member's own",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				return f.ops.RevokeMachine(ctx, a, "m-member")
			},
			action: admin.ActionMachineRevoked,
			want:   map[string]codes.Code{"admin": ok, "owner": nf, "tadmin": nf, "member": ok, "outsider": nf, "disabled": pd, "cli": ok},
		},
		{
			name: "RevokeMachine/unknown",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				return f.ops.RevokeMachine(ctx, a, "m-nope")
			},
			action: admin.ActionMachineRevoked,
			want:   map[string]codes.Code{"admin": nf, "owner": nf, "tadmin": nf, "member": nf, "outsider": nf, "disabled": pd, "cli": nf},
		},
		{
			name: "DeleteMachine/other team",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				return f.ops.DeleteMachine(ctx, a, "m-t2")
			},
			action: admin.ActionMachineDeleted,
			want:   map[string]codes.Code{"admin": ok, "owner": nf, "tadmin": nf, "member": nf, "outsider": nf, "disabled": pd, "cli": ok},
		},
		{
			name: "DeleteMachine/outsider's own",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				return f.ops.DeleteMachine(ctx, a, "m-outsider")
			},
			action: admin.ActionMachineDeleted,
			want:   map[string]codes.Code{"admin": ok, "owner": nf, "tadmin": nf, "member": nf, "outsider": ok, "disabled": pd, "cli": ok},
		},
		{
			name: "Audit",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, err := f.ops.Audit(ctx, a, admin.AuditQuery{})
				return err
			},
			want: map[string]codes.Code{"admin": ok, "owner": ok, "tadmin": ok, "member": ok, "outsider": ok, "disabled": pd, "cli": ok},
		},
		{
			name: "WhoAmI",
			call: func(ctx context.Context, f *fixture, a admin.Actor) error {
				_, err := f.ops.WhoAmI(ctx, a, "")
				return err
			},
			want: map[string]codes.Code{"admin": ok, "owner": ok, "tadmin": ok, "member": ok, "outsider": ok, "disabled": pd, "cli": fp},
		},
	}
	for _, tc := range cases {
		for _, name := range actorNames {
			want, listed := tc.want[name]
			if !listed {
				t.Fatalf("%s: no expectation for actor %s", tc.name, name)
			}
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t)
				a := actors[name]
				err := tc.call(t.Context(), f, a)
				if got := status.Code(err); got != want {
					t.Fatalf("code %v (%v), want %v", got, err, want)
				}
				if _, isStatus := status.FromError(err); err != nil && !isStatus {
					t.Fatalf("error %v is not a gRPC status", err)
				}
				checkAudited(t, f, a, tc.action, err)
			})
		}
	}
}

// checkAudited checks the last audit event records err: a refusal
// (PERMISSION_DENIED, or NOT_FOUND for a user) as access.denied, a change
// (action != "") as action with outcome ok or error.
func checkAudited(t *testing.T, f *fixture, a admin.Actor, action string, err error) {
	t.Helper()
	evs, lerr := f.st.ListAudit(t.Context(), store.AuditFilter{})
	if lerr != nil {
		t.Fatal(lerr)
	}
	if len(evs) == 0 {
		t.Fatal("no audit events")
	}
	last := evs[len(evs)-1]
	wantActor := a.UserID
	if a.CLI {
		wantActor = admin.CLIActor
	}
	code := status.Code(err)
	refused := code == codes.PermissionDenied || code == codes.NotFound && !a.CLI && !a.Admin
	switch {
	case refused:
		if last.Action != admin.ActionAccessDenied || last.Outcome != admin.OutcomeDenied {
			t.Fatalf("last audit event %+v, want access.denied for %v", last, err)
		}
		if !strings.Contains(last.Detail, status.Convert(err).Message()) {
			t.Errorf("detail %q does not give the refusal %q", last.Detail, status.Convert(err).Message())
		}
	case action == "":
		return
	case err != nil:
		if last.Action != action || last.Outcome != admin.OutcomeError {
			t.Fatalf("last audit event %+v, want %s error", last, action)
		}
	default:
		if last.Action != action || last.Outcome != admin.OutcomeOK || last.Detail == "" {
			t.Fatalf("last audit event %+v, want %s ok with a detail", last, action)
		}
	}
	if last.Actor != wantActor || last.Remote != a.Remote {
		t.Errorf("audit actor %q remote %q, want %q %q", last.Actor, last.Remote, wantActor, a.Remote)
	}
}

// TestVisibility checks what each actor's lists contain.
func TestVisibility(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	machines := map[string][]string{
		"admin":    {"m-member", "m-outsider", "m-t1", "m-t2"},
		"cli":      {"m-member", "m-outsider", "m-t1", "m-t2"},
		"owner":    {"m-t1"},
		"tadmin":   {"m-t1"},
		"member":   {"m-member"},
		"outsider": {"m-outsider"},
	}
	teams := map[string][]string{
		"admin":    {"t1", "t2"},
		"cli":      {"t1", "t2"},
		"owner":    {"t1"},
		"tadmin":   {"t1"},
		"member":   {"t1"},
		"outsider": nil,
	}
	for name, want := range machines {
		t.Run("machines/"+name, func(t *testing.T) {
			ms, err := f.ops.ListMachines(ctx, actors[name])
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range ms {
				got = append(got, m.ID)
			}
			if !slices.Equal(got, want) {
				t.Errorf("machines %v, want %v", got, want)
			}
		})
	}
	for name, want := range teams {
		t.Run("teams/"+name, func(t *testing.T) {
			ts, err := f.ops.ListTeams(ctx, actors[name])
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tm := range ts {
				got = append(got, tm.ID)
				if len(tm.Members) == 0 {
					t.Errorf("team %s listed without members", tm.ID)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("teams %v, want %v", got, want)
			}
		})
	}
}

// TestTokenSecrets: the secret is returned once and only its hash stored;
// nothing returned or audited carries the secret or the hash.
func TestTokenSecrets(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	secret, tok, err := f.ops.CreateToken(ctx, actors["member"], "", "phone", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := authtoken.Check(authtoken.Client, secret); err != nil {
		t.Fatalf("secret %q: %v", secret, err)
	}
	if tok.Hash != nil || tok.ID != authtoken.ID(authtoken.Hash(secret)) {
		t.Errorf("returned token %+v: want no hash and the secret's public id", tok)
	}
	if want := f.now.Add(admin.DefaultTokenTTL); !tok.ExpiresAt.Equal(want) {
		t.Errorf("expires %v, want the default %v", tok.ExpiresAt, want)
	}
	stored, err := f.st.TokenByHash(ctx, authtoken.Hash(secret))
	if err != nil || stored.ID != tok.ID || stored.UserID != "member" {
		t.Fatalf("stored token %+v, %v", stored, err)
	}
	listed, err := f.ops.ListTokens(ctx, actors["member"], "")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range listed {
		if l.Hash != nil {
			t.Errorf("listed token %s carries its hash", l.ID)
		}
	}
	join, et, err := f.ops.CreateEnrollToken(ctx, actors["owner"], "t1", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := authtoken.Check(authtoken.Join, join); err != nil {
		t.Fatalf("join token %q: %v", join, err)
	}
	if et.TeamID != "t1" || et.UserID != "owner" || !et.ExpiresAt.Equal(f.now.Add(admin.DefaultJoinTTL)) || et.Hash != nil {
		t.Errorf("join token %+v: want team t1 by owner, expiring in the default 1h, no hash", et)
	}
	evs, err := f.st.ListAudit(ctx, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		for _, s := range []string{secret, join, string(authtoken.Hash(secret))} {
			if strings.Contains(e.Detail+e.Target, s) {
				t.Errorf("audit event %+v carries a secret", e)
			}
		}
	}
}

// TestCLIEnrollTokenForTeam: a team join token made by the CLI records the
// team's first owner as its creator.
func TestCLIEnrollTokenForTeam(t *testing.T) {
	f := newFixture(t)
	_, et, err := f.ops.CreateEnrollToken(t.Context(), admin.CLI(), "t1", "", 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// t1's owners are "off" (disabled) and "owner": the first in id order
	// is off, who may not act, so the CLI must pick an enabled one.
	if et.UserID != "owner" || et.TeamID != "t1" {
		t.Errorf("join token by %q for %q, want by owner for t1", et.UserID, et.TeamID)
	}
}

// TestOwnerRules: only owners grant or take the owner role, and a team
// keeps an owner.
func TestOwnerRules(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	steps := []struct {
		name string
		do   func() error
		want codes.Code
	}{
		{"team admin cannot demote an owner", func() error {
			_, err := f.ops.AddMember(ctx, actors["tadmin"], "t1", "owner", store.RoleMember)
			return err
		}, pd},
		{"team admin cannot remove an owner", func() error { return f.ops.RemoveMember(ctx, actors["tadmin"], "t1", "owner") }, pd},
		{"team admin promotes a member to admin", func() error {
			_, err := f.ops.AddMember(ctx, actors["tadmin"], "t1", "member", store.RoleAdmin)
			return err
		}, ok},
		{"owner removes the disabled co-owner", func() error { return f.ops.RemoveMember(ctx, actors["owner"], "t1", "off") }, ok},
		{"last owner cannot step down", func() error {
			_, err := f.ops.AddMember(ctx, actors["owner"], "t1", "owner", store.RoleAdmin)
			return err
		}, fp},
		{"last owner cannot leave", func() error { return f.ops.RemoveMember(ctx, actors["owner"], "t1", "owner") }, fp},
		{"relay administrator cannot remove the last owner either", func() error { return f.ops.RemoveMember(ctx, actors["admin"], "t1", "owner") }, fp},
		{"owner makes tadmin owner", func() error {
			_, err := f.ops.AddMember(ctx, actors["owner"], "t1", "tadmin", store.RoleOwner)
			return err
		}, ok},
		{"now owner may step down", func() error {
			_, err := f.ops.AddMember(ctx, actors["owner"], "t1", "owner", store.RoleMember)
			return err
		}, ok},
		{"and, a member now, manages nothing", func() error { return f.ops.RemoveMember(ctx, actors["owner"], "t1", "member") }, pd},
		{"removing a non-member", func() error { return f.ops.RemoveMember(ctx, actors["tadmin"], "t1", "outsider") }, nf},
		{"adding an unknown user", func() error {
			_, err := f.ops.AddMember(ctx, actors["tadmin"], "t1", "ghost", store.RoleMember)
			return err
		}, nf},
		{"adding a disabled user", func() error {
			_, err := f.ops.AddMember(ctx, actors["tadmin"], "t1", "off", store.RoleMember)
			return err
		}, fp},
	}
	for _, s := range steps {
		if got := status.Code(s.do()); got != s.want {
			t.Fatalf("%s: code %v, want %v", s.name, got, s.want)
		}
	}
	ms, err := f.st.Members(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]store.Role{}
	for _, m := range ms {
		roles[m.UserID] = m.Role
	}
	want := map[string]store.Role{"owner": store.RoleMember, "tadmin": store.RoleOwner, "member": store.RoleAdmin}
	if len(roles) != len(want) {
		t.Fatalf("members %v, want %v", roles, want)
	}
	for u, r := range want {
		if roles[u] != r {
			t.Errorf("members %v, want %v", roles, want)
		}
	}
}

// TestInvalidArguments: bad input is INVALID_ARGUMENT naming the field.
func TestInvalidArguments(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	root, member := actors["admin"], actors["member"]
	cases := []struct {
		name  string
		err   error
		field string
	}{
		{"empty user", second(f.ops.CreateUser(ctx, root, store.User{})), "id"},
		{"upper case user", second(f.ops.CreateUser(ctx, root, store.User{ID: "Alice"})), "lower case"},
		{"user with space", second(f.ops.CreateUser(ctx, root, store.User{ID: "a b"})), "id"},
		{"long user", second(f.ops.CreateUser(ctx, root, store.User{ID: strings.Repeat("a", 65)})), "id"},
		{"bad email", second(f.ops.CreateUser(ctx, root, store.User{ID: "bob", Email: "not an address"})), "email"},
		{"team with @", second(f.ops.CreateTeam(ctx, root, "a@b", "owner")), "id"},
		{"bad owner", second(f.ops.CreateTeam(ctx, root, "t9", "Owner")), "owner_user_id"},
		{"bad role", second(f.ops.AddMember(ctx, root, "t1", "outsider", "boss")), "role"},
		{"token name with newline", third(f.ops.CreateToken(ctx, member, "", "a\nb", 0)), "name"},
		{"long token name", third(f.ops.CreateToken(ctx, member, "", strings.Repeat("x", 65), 0)), "name"},
		{"negative ttl", third(f.ops.CreateToken(ctx, member, "", "", -time.Hour)), "ttl"},
		{"ttl over a year", third(f.ops.CreateToken(ctx, member, "", "", admin.MaxTokenTTL+time.Hour)), "ttl"},
		{"join ttl over a day", third(f.ops.CreateEnrollToken(ctx, member, "", "", admin.MaxJoinTTL+time.Second)), "ttl"},
		{"empty token id", second(f.ops.RevokeToken(ctx, member, "")), "token_id"},
		{"empty machine id", f.ops.RevokeMachine(ctx, member, ""), "machine_id"},
		{"audit limit", second(f.ops.Audit(ctx, root, admin.AuditQuery{Limit: -1})), "limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if status.Code(tc.err) != codes.InvalidArgument || !strings.Contains(status.Convert(tc.err).Message(), tc.field) {
				t.Errorf("got %v, want INVALID_ARGUMENT naming %q", tc.err, tc.field)
			}
		})
	}
	// Valid extremes pass.
	if _, _, err := f.ops.CreateToken(ctx, member, "", "Łukasz's laptop ✓", admin.MaxTokenTTL); err != nil {
		t.Errorf("max ttl, unicode name: %v", err)
	}
	if _, err := f.ops.CreateUser(ctx, root, store.User{ID: "a.b_c-d@example.com", Email: "a@example.com"}); err != nil {
		t.Errorf("email-like name: %v", err)
	}
}

// TestAuditScope: users see their own events and those about them;
// administrators choose.
func TestAuditScope(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	if _, err := f.ops.RevokeToken(ctx, actors["outsider"], f.memberToken); status.Code(err) != codes.NotFound {
		t.Fatalf("outsider revoking member's token: %v", err)
	}
	if err := f.ops.RevokeMachine(ctx, actors["member"], "m-member"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		actor admin.Actor
		user  string
		check func(e store.AuditEvent) bool
	}{
		{"member sees only own", actors["member"], "", func(e store.AuditEvent) bool { return e.Actor == "member" || e.Target == "member" }},
		{"member cannot ask for outsider's", actors["member"], "outsider", func(e store.AuditEvent) bool { return e.Actor == "member" || e.Target == "member" }},
		{"admin asks for outsider's", actors["admin"], "outsider", func(e store.AuditEvent) bool { return e.Actor == "outsider" || e.Target == "outsider" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := f.ops.Audit(ctx, tc.actor, admin.AuditQuery{UserID: tc.user})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) == 0 {
				t.Fatal("no events")
			}
			for _, e := range evs {
				if !tc.check(e) {
					t.Errorf("unexpected event %+v", e)
				}
			}
		})
	}
	evs, err := f.ops.Audit(ctx, actors["admin"], admin.AuditQuery{Since: f.now.Add(-time.Minute), Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[1].Action != admin.ActionMachineRevoked {
		t.Errorf("newest two events %+v, want the machine revocation last", evs)
	}
}

// TestSelfService: disabling oneself is refused; WhoAmI reports the token.
func TestSelfService(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	if _, err := f.ops.DisableUser(ctx, actors["admin"], "root", true); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("admin disabling themself: %v, want FAILED_PRECONDITION", err)
	}
	me, err := f.ops.WhoAmI(ctx, actors["member"], f.memberToken)
	if err != nil {
		t.Fatal(err)
	}
	if me.User.ID != "member" || len(me.Teams) != 1 || me.Teams[0].Role != store.RoleMember || me.Token == nil || me.Token.ID != f.memberToken || me.Token.Hash != nil {
		t.Errorf("WhoAmI %+v", me)
	}
	// A stale identity claiming admin rights the store does not give
	// gets none.
	stale := admin.Actor{UserID: "member", Admin: true}
	if _, err := f.ops.ListUsers(ctx, stale); status.Code(err) != codes.PermissionDenied {
		t.Errorf("member claiming admin: %v, want PERMISSION_DENIED", err)
	}
	if _, err := f.ops.ListUsers(ctx, admin.Actor{UserID: "ghost"}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("unknown user: %v, want UNAUTHENTICATED", err)
	}
}

func second[T any](_ T, err error) error { return err }

func third[T, U any](_ T, _ U, err error) error { return err }
