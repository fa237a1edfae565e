package router

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store"
)

// TestShareRouting: alice's machine m-1 shares a session with carol (a
// share token of carol's, scoped to m-1). Carol's share token opens
// channels to m-1 and nowhere else; carol's own login may make the share
// code's Pair call to m-1 while the share is live, not Open nor anything
// else; dave, with no share, reaches nothing; an ended share admits no
// Pair. (No tunnel is up: a call that reached its machine answers
// MACHINE_OFFLINE.)
func TestShareRouting(t *testing.T) {
	st := scopeStore(t)
	ctx := t.Context()
	for _, u := range []string{"carol", "dave", "erin"} {
		if err := st.CreateUser(ctx, store.User{ID: u}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	for _, tok := range []store.Token{
		{ID: "tok-share", UserID: "carol", Hash: make([]byte, 32), MachineID: "m-1", Scope: store.ScopeShare, ExpiresAt: now.Add(time.Hour)},
		{ID: "tok-ended", UserID: "erin", Hash: append(make([]byte, 31), 1), MachineID: "m-1", Scope: store.ScopeShare, ExpiresAt: now.Add(-time.Minute)},
	} {
		if err := st.CreateToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	authn := auth.New(st, auth.Options{})
	rt := &Router{Auth: authn, Registry: registry.New(), Store: st, Log: slog.New(slog.DiscardHandler)}
	share := auth.Identity{UserID: "carol", TokenID: "tok-share", Scope: store.ScopeShare, ScopeMachine: "m-1"}
	carol := auth.Identity{UserID: "carol", TokenID: "tok-carol"}
	dave := auth.Identity{UserID: "dave", TokenID: "tok-dave"}
	erin := auth.Identity{UserID: "erin", TokenID: "tok-erin"}
	const (
		open = "/betcode.v1.ChannelService/Open"
		pair = "/betcode.v1.ChannelService/Pair"
	)
	offline := `Target machine "m-1" is not connected`
	for _, tc := range []struct {
		name          string
		id            auth.Identity
		path, machine string
		code, msg     string
	}{
		{"share token opens its machine's channels", share, open, "m-1", "14", offline},
		{"share token, another machine of the owner", share, open, "m-2", "5", `no machine "m-2"`},
		{"teammate's login pairs with the shared machine", carol, pair, "m-1", "14", offline},
		{"teammate's login does not open channels", carol, open, "m-1", "5", `no machine "m-1"`},
		{"teammate's login, a machine not shared", carol, pair, "m-2", "5", `no machine "m-2"`},
		{"a third user cannot pair", dave, pair, "m-1", "5", `no machine "m-1"`},
		{"a third user cannot open", dave, open, "m-1", "5", `no machine "m-1"`},
		{"an ended share admits no pairing", erin, pair, "m-1", "5", `no machine "m-1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			rt.ServeHTTP(rec, grpcRequest(t.Context(), tc.path, tc.machine, tc.id))
			if code, msg := statusOf(rec); code != tc.code || !strings.HasPrefix(msg, tc.msg) {
				t.Fatalf("answered %s %q; want %s %q", code, msg, tc.code, tc.msg)
			}
		})
	}
}
