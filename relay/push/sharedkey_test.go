package push

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/betcode-dev/betcode/relay/store"
)

// TestSharedKey: two relays on one store derive the same key for a
// purpose (the first stores the key it derives from), different purposes
// give different keys, and a relay on another store another key.
func TestSharedKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	a, b := openSQLite(t, path), openSQLite(t, path)
	other := openSQLite(t, filepath.Join(t.TempDir(), "other.db"))
	key := func(st store.Store, purpose string) []byte {
		t.Helper()
		k, err := SharedKey(t.Context(), st, purpose)
		if err != nil {
			t.Fatal(err)
		}
		if len(k) != 32 {
			t.Fatalf("key of %d bytes; want 32", len(k))
		}
		return k
	}
	ka, kb := key(a, "flows"), key(b, "flows")
	if !bytes.Equal(ka, kb) {
		t.Error("two relays on one store derived different keys")
	}
	if bytes.Equal(ka, key(a, "something else")) {
		t.Error("two purposes derived the same key")
	}
	if bytes.Equal(ka, key(other, "flows")) {
		t.Error("relays on different stores derived the same key")
	}
}
