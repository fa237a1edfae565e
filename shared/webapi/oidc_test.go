package webapi

import (
	"net/http"
	"testing"
)

// TestOIDCMount: /api/oidc/... goes to Options.OIDC, whose presence
// /api/info reports; without it the routes answer 404 and info says no.
func TestOIDCMount(t *testing.T) {
	for _, tt := range []struct {
		name string
		oidc http.Handler
		want int
	}{
		{"none", nil, http.StatusNotFound},
		{"served", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTeapot)
		}), http.StatusTeapot},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, Options{Role: RoleRelay, OIDC: tt.oidc})
			for _, r := range oidcRoutes {
				if st, _, body := ts.call(t, r.Method, r.Pattern, "", `{}`); st != tt.want {
					t.Errorf("%s %s = %d %s, want %d", r.Method, r.Pattern, st, body, tt.want)
				}
			}
			st, _, body := ts.call(t, "GET", "/api/info", "", nil)
			if i := decode[map[string]any](t, body); st != 200 || i["oidc"] != (tt.oidc != nil) {
				t.Fatalf("info = %d %s", st, body)
			}
		})
	}
}
