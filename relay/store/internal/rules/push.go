package rules

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
)

// PushSubscription validates sub, assigns it a new random ID, fills a zero
// CreatedAt with now, a nil Kinds with an empty list, and clears the
// delivery state (AddPushSubscription starts it afresh).
func PushSubscription(sub *store.PushSubscription, now time.Time) error {
	for _, f := range []struct{ what, v string }{
		{"push subscription user", sub.UserID}, {"push endpoint", sub.Endpoint}, {"push key p256dh", sub.P256dh}, {"push key auth", sub.Auth},
	} {
		if err := ID(f.what, f.v); err != nil {
			return err
		}
	}
	if err := texts("push subscription name", sub.Name); err != nil {
		return err
	}
	if err := texts("push kind", sub.Kinds...); err != nil {
		return err
	}
	if sub.Kinds == nil {
		sub.Kinds = []string{}
	}
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("push subscription id: %w", err)
	}
	sub.ID = "ps_" + hex.EncodeToString(b[:])
	sub.CreatedAt = Time(sub.CreatedAt, now)
	sub.LastStatus, sub.LastAt, sub.LastError = "", time.Time{}, ""
	return nil
}

// PushOutcome validates a RecordPushOutcome status.
func PushOutcome(status, errText string) error {
	switch status {
	case store.PushSent, store.PushFailed, store.PushExpired:
	default:
		return fmt.Errorf("%w: push status %q", store.ErrInvalid, status)
	}
	return texts("push error", errText)
}

// PushKey validates a ClaimPushKey argument pair.
func PushKey(subID, key string) error {
	if err := ID("push subscription id", subID); err != nil {
		return err
	}
	return ID("push key", key)
}

// VAPIDKey validates a VAPIDKey candidate and fills a zero CreatedAt.
func VAPIDKey(k *store.VAPIDKey, now time.Time) error {
	if err := ID("vapid private key", k.Private); err != nil {
		return err
	}
	if err := ID("vapid public key", k.Public); err != nil {
		return err
	}
	k.CreatedAt = Time(k.CreatedAt, now)
	return nil
}
