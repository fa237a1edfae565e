package auth

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/shared/authtoken"
)

// scopedToken stores a token of alice scoped to machine m-1.
func scopedToken(t *testing.T, st store.Store, scope string, exp time.Time) string {
	t.Helper()
	tok, err := authtoken.New(authtoken.Client)
	if err != nil {
		t.Fatal(err)
	}
	h := authtoken.Hash(tok)
	if err := st.CreateToken(t.Context(), store.Token{ID: authtoken.ID(h), UserID: "alice", Hash: h, MachineID: "m-1",
		Scope: scope, ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestScopedTokens: a device token opens channels to its machine only, a
// pairing ticket one Pair call, once; everything else is refused at the
// door with the code a client can act on.
func TestScopedTokens(t *testing.T) {
	st := openStore(t)
	if err := st.CreateUser(t.Context(), store.User{ID: "alice", Admin: true}); err != nil {
		t.Fatal(err)
	}
	a := New(st, Options{})
	runAuth(t, a)
	var seen struct {
		id      Identity
		machine string
	}
	h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.id, _ = FromContext(r.Context())
		seen.machine = r.Header.Get(machineHeader)
	}))
	call := func(tok, path, machine string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, path, nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		if machine != "" {
			r.Header.Set(machineHeader, machine)
		}
		seen.id, seen.machine = Identity{}, ""
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	device := scopedToken(t, st, store.ScopeDevice, time.Time{})
	ticket := scopedToken(t, st, store.ScopePair, time.Now().Add(10*time.Minute))
	expired := scopedToken(t, st, store.ScopePair, time.Now().Add(-time.Second))

	for _, tc := range []struct {
		name, tok, path, machine string
		wantStatus, wantMsg      string // "" status: admitted
	}{
		{"device opens a channel", device, "/betcode.v1.ChannelService/Open", "", "", ""},
		{"device names its machine", device, "/betcode.v1.ChannelService/Open", "m-1", "", ""},
		{"device, another machine", device, "/betcode.v1.ChannelService/Open", "m-2", "5", `no machine "m-2"`},
		{"device, an agent service", device, "/betcode.v1.AgentService/ListSessions", "", "7", "scoped to machine m-1"},
		{"device, the relay's machines", device, "/betcode.v1.MachineService/ListMachines", "", "7", "scoped to machine m-1"},
		{"device, administration", device, "/betcode.v1.AdminService/ListUsers", "", "7", "scoped to machine m-1"},
		{"device, the web API", device, "/api/sessions", "", "7", "scoped to machine m-1"},
		{"ticket, Open", ticket, "/betcode.v1.ChannelService/Open", "", "7", "scoped to machine m-1"},
		{"ticket pairs", ticket, "/betcode.v1.ChannelService/Pair", "", "", ""},
		{"ticket pairs twice", ticket, "/betcode.v1.ChannelService/Pair", "", "16", "already used"},
		{"expired ticket", expired, "/betcode.v1.ChannelService/Pair", "", "16", "already used, or expired"},
	} {
		rec := call(tc.tok, tc.path, tc.machine)
		got := rec.Header().Get("Grpc-Status")
		if got != tc.wantStatus {
			t.Errorf("%s: grpc-status %q (%s), want %q", tc.name, got, rec.Header().Get("Grpc-Message"), tc.wantStatus)
			continue
		}
		if tc.wantStatus == "" {
			if seen.machine != "m-1" || seen.id.Scope == "" || seen.id.ScopeMachine != "m-1" || seen.id.Admin {
				t.Errorf("%s: admitted as %+v to machine %q, want scoped to m-1 (not admin)", tc.name, seen.id, seen.machine)
			}
			continue
		}
		if msg, _ := url.PathUnescape(rec.Header().Get("Grpc-Message")); !strings.Contains(msg, tc.wantMsg) {
			t.Errorf("%s: message %q, want %q", tc.name, msg, tc.wantMsg)
		}
	}
}
