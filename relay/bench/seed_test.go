package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/betcode-dev/betcode/relay/server"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/shared/authtoken"
)

// benchUser owns every machine the benchmarks connect.
const benchUser = "bench"

// seedUser creates benchUser in the relay's store and returns a new client
// token of theirs.
func seedUser(tb testing.TB, dbURL, dataDir string) string {
	tb.Helper()
	st := openStore(tb, dbURL, dataDir)
	defer st.Close()
	ctx := context.Background()
	if err := st.CreateUser(ctx, store.User{ID: benchUser}); err != nil && !errors.Is(err, store.ErrExists) {
		tb.Fatal(err)
	}
	tok, err := newToken(ctx, st, benchUser)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// seedScale adds tokens client tokens (of as many users as there are
// machines) and machines other machines to r's store, so that lookups run
// at the scale.
func seedScale(tb testing.TB, r *relayProc, tokens, machines int) {
	tb.Helper()
	st := openStore(tb, r.dbURL, r.dataDir)
	defer st.Close()
	ctx := context.Background()
	for i := range machines {
		user := fmt.Sprintf("user-%04d", i)
		if err := st.CreateUser(ctx, store.User{ID: user}); err != nil && !errors.Is(err, store.ErrExists) {
			tb.Fatal(err)
		}
		if err := st.UpsertMachine(ctx, store.Machine{ID: fmt.Sprintf("other-%04d", i), OwnerID: user}); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range tokens {
		if _, err := newToken(ctx, st, fmt.Sprintf("user-%04d", i%machines)); err != nil {
			tb.Fatal(err)
		}
	}
}

func openStore(tb testing.TB, dbURL, dataDir string) store.Store {
	tb.Helper()
	st, err := server.OpenStore(context.Background(), dbURL, dataDir, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

func newToken(ctx context.Context, st store.Store, user string) (string, error) {
	tok, err := authtoken.New(authtoken.Client)
	if err != nil {
		return "", err
	}
	h := authtoken.Hash(tok)
	return tok, st.CreateToken(ctx, store.Token{ID: authtoken.ID(h), UserID: user, Name: "bench", Hash: h})
}

// bearer sends "authorization: Bearer <token>" on every call.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }
