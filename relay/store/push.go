package store

import (
	"context"
	"log/slog"
	"net/url"
	"slices"
	"time"
)

// Push delivery states recorded on a PushSubscription (LastStatus).
const (
	PushSent    = "sent"
	PushFailed  = "failed"
	PushExpired = "expired" // the push service answered 404 or 410: never sent to again
)

// PushSubscription is one browser's Web Push subscription (RFC 8030, the
// browser's PushSubscription.toJSON()). Endpoint is unique: a browser that
// subscribes again, for whichever user, replaces its row. P256dh and Auth
// are the browser's secrets for RFC 8291 encryption: LogValue leaves them
// (and the endpoint's path, a capability URL) out of logs.
type PushSubscription struct {
	// ID is assigned by AddPushSubscription.
	ID, UserID string
	// Endpoint is the push service URL; P256dh (the browser's P-256 public
	// key) and Auth (its 16-byte secret) are base64url, as the browser
	// gives them.
	Endpoint, P256dh, Auth string
	// Name is a label for listings (the user agent, "Pixel 8").
	Name string
	// Kinds are the notification types this subscription wants
	// ("permission_request", "question", "turn_complete", "turn_failed");
	// empty means all.
	Kinds     []string
	CreatedAt time.Time
	// LastStatus is "" (nothing sent yet), PushSent, PushFailed or
	// PushExpired; LastAt when; LastError the last failure's text.
	LastStatus string
	LastAt     time.Time
	LastError  string
}

// LogValue implements slog.LogValuer: the id, user and endpoint origin
// only, never the keys.
func (p PushSubscription) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", p.ID), slog.String("user", p.UserID), slog.String("endpoint_host", EndpointHost(p.Endpoint)))
}

// EndpointHost returns the host of a push endpoint URL ("" when it has
// none), what listings and logs show of it.
func EndpointHost(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return ""
	}
	return u.Host
}

// Wants reports whether the subscription takes notifications of kind.
func (p *PushSubscription) Wants(kind string) bool {
	return len(p.Kinds) == 0 || slices.Contains(p.Kinds, kind)
}

// VAPIDKey is the relay's VAPID (RFC 8292) key pair: a P-256 key,
// base64url without padding, Private the 32-byte scalar and Public the
// 65-byte uncompressed point (what browsers take as applicationServerKey).
type VAPIDKey struct {
	Private, Public string
	CreatedAt       time.Time
}

// Push holds Web Push subscriptions, the deduplication of notifications
// across relay replicas, and the VAPID key every replica signs with.
type Push interface {
	// AddPushSubscription stores sub for sub.UserID, or, when its Endpoint
	// is already stored (for any user), replaces that row's user, keys,
	// name and kinds and clears its delivery state, keeping its ID and
	// CreatedAt. It returns the stored row. A zero CreatedAt means now.
	AddPushSubscription(ctx context.Context, sub PushSubscription) (PushSubscription, error)
	// PushSubscriptions returns userID's subscriptions, oldest first
	// (expired ones too: the user sees them).
	PushSubscriptions(ctx context.Context, userID string) ([]PushSubscription, error)
	// DeletePushSubscription deletes subscription id of userID; another
	// user's or an unknown id gives ErrNotFound.
	DeletePushSubscription(ctx context.Context, userID, id string) error
	// RecordPushOutcome records a delivery attempt to subscription id:
	// status PushSent, PushFailed or PushExpired, at at, with errText
	// ("" on success). An expired subscription stays expired (a late
	// PushSent or PushFailed does not revive it). Unknown: ErrNotFound.
	RecordPushOutcome(ctx context.Context, id, status string, at time.Time, errText string) error
	// ClaimPushKey records that the notification key was sent to
	// subscription subID and reports whether this call was the first:
	// exactly one of any number of concurrent calls, across every process
	// sharing the store, gets true.
	ClaimPushKey(ctx context.Context, subID, key string, at time.Time) (bool, error)
	// PrunePush deletes the claims made before before and the expired
	// subscriptions last attempted before before, and returns how many
	// rows it deleted.
	PrunePush(ctx context.Context, before time.Time) (int, error)
	// VAPIDKey returns the stored VAPID key, storing candidate first when
	// there is none: every process sharing the store gets the same key.
	VAPIDKey(ctx context.Context, candidate VAPIDKey) (VAPIDKey, error)
}
