package auth

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/storetest"
)

// BenchmarkAuthorize is what authentication and authorization add to one
// forwarded call: the middleware (bearer token parsed, hashed, looked up)
// and the router's machine check, with 10,000 tokens and 1,000 machines in
// the store and the cache warm, as on a serving relay. It reports the p50
// and p99 of single calls besides ns/op.
func BenchmarkAuthorize(b *testing.B) {
	st := openStoreTB(b)
	ctx := b.Context()
	const users, tokens = 1000, 10000
	for i := range users {
		u := fmt.Sprintf("user-%04d", i)
		if err := st.CreateUser(ctx, store.User{ID: u}); err != nil {
			b.Fatal(err)
		}
		if err := st.UpsertMachine(ctx, store.Machine{ID: fmt.Sprintf("m-%04d", i), OwnerID: u}); err != nil {
			b.Fatal(err)
		}
	}
	toks := make([]string, tokens)
	for i := range toks {
		toks[i] = storetest.UserToken(b, st, fmt.Sprintf("user-%04d", i%users))
	}
	a := New(st, Options{})
	h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := FromContext(r.Context())
		ok, err := a.CanReach(r.Context(), id.UserID, id.UserID, "")
		if err != nil || !ok {
			b.Fatal("not authorized", err)
		}
		Machine(r.Context(), "m-0000")
	}))
	reqs := make([]*http.Request, tokens)
	for i, tok := range toks {
		r := httptest.NewRequest(http.MethodPost, "/betcode.v1.AgentService/ListSessions", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		reqs[i] = r
	}
	w := httptest.NewRecorder()
	serve := func(i int) {
		r := reqs[i%tokens].Clone(ctx)
		r.Header.Set("Authorization", "Bearer "+toks[i%tokens])
		h.ServeHTTP(w, r)
	}
	for i := range tokens { // warm the cache, as a serving relay's is
		serve(i)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		serve(i)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
}
