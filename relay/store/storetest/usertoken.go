package storetest

import (
	"errors"
	"testing"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/shared/authtoken"
)

// UserToken stores user (unless it exists) and a new client token of
// theirs in st, and returns the token's secret.
func UserToken(t testing.TB, st store.Store, user string) string {
	t.Helper()
	if err := st.CreateUser(t.Context(), store.User{ID: user}); err != nil && !errors.Is(err, store.ErrExists) {
		t.Fatal(err)
	}
	tok, err := authtoken.New(authtoken.Client)
	if err != nil {
		t.Fatal(err)
	}
	h := authtoken.Hash(tok)
	if err := st.CreateToken(t.Context(), store.Token{ID: authtoken.ID(h), UserID: user, Name: "test", Hash: h}); err != nil {
		t.Fatal(err)
	}
	return tok
}
