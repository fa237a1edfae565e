package push

import (
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"github.com/betcode-dev/betcode/relay/store"
)

// SharedKey returns a 32-byte key for purpose that every replica sharing
// st derives alike: HKDF-SHA256 of the relay's VAPID private key, which
// the store holds once for all of them (generated and stored on first use,
// as New does). Different purposes give independent keys.
func SharedKey(ctx context.Context, st store.Push, purpose string) ([]byte, error) {
	candidate, err := newVAPIDKey()
	if err != nil {
		return nil, err
	}
	k, err := st.VAPIDKey(ctx, candidate)
	if err != nil {
		return nil, fmt.Errorf("push: load the relay's shared key: %w", err)
	}
	secret, err := base64.RawURLEncoding.DecodeString(k.Private)
	if err != nil {
		return nil, fmt.Errorf("push: the stored VAPID key: %w", err)
	}
	key, err := hkdf.Key(sha256.New, secret, nil, purpose, 32)
	if err != nil {
		return nil, fmt.Errorf("push: derive a key for %s: %w", purpose, err)
	}
	return key, nil
}
