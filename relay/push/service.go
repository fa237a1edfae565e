// Package push sends Web Push notifications (RFC 8030, VAPID RFC 8292,
// aes128gcm RFC 8291) for the relay: when a session on a connected machine
// waits for a permission answer or a question, or ends a turn, the users
// who may act on it get a notification on every browser they subscribed,
// whose actions answer the prompt through the web API.
//
// The pieces:
//
//   - Watch / WatchTunnel (watch.go) follow each connected machine's
//     sessions with AgentService.WatchSessions over its tunnel, for as long
//     as the tunnel lives, and turn updates into notifications
//     (notification.go).
//   - The sender (send.go) resolves recipients, claims a deduplication key
//     per subscription in the store (so that replicas and reconnecting
//     watchers send each notification once), encrypts and POSTs, with
//     bounded concurrency and timeouts, off the tunnel's goroutines.
//   - Handler (handler.go) serves /api/push: the caller's subscriptions.
//   - SendRelayed (relayed.go) delivers the messages machines write and
//     encrypt themselves for their paired devices (TunnelService.SendPush):
//     the relay signs VAPID and carries the opaque body.
//
// docs/push.md describes the flags, metrics and how to debug silent
// failures.
package push

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/betcode-dev/betcode/relay/store"
)

// Store is what the service needs of the relay's store: store.Store has
// it.
type Store interface {
	store.Push
	// GetMachine gives a machine's owner and team, who may receive its
	// notifications.
	GetMachine(ctx context.Context, id string) (store.Machine, error)
	// Members gives a team's users.
	Members(ctx context.Context, teamID string) ([]store.Member, error)
}

// Authenticator is what the service needs of relay/auth's Authenticator:
// the bearer-token middleware of the web API calls and the machine access
// check for recipients.
type Authenticator interface {
	// Middleware authenticates a request's bearer token and puts the
	// caller's auth.Identity in its context, or answers it with a gRPC
	// status (which Handler turns into the web API's JSON error).
	Middleware(next http.Handler) http.Handler
	// CanReach reports whether userID may use a machine owned by owner (or
	// team).
	CanReach(ctx context.Context, userID, owner, team string) (bool, error)
}

// Defaults for zero Options fields.
const (
	DefaultTTL            = time.Hour
	DefaultConcurrency    = 16
	DefaultSendTimeout    = 15 * time.Second
	DefaultMaxPending     = 1000
	DefaultRetention      = 7 * 24 * time.Hour
	DefaultPruneInterval  = time.Hour
	DefaultWatchRetryMin  = time.Second
	DefaultWatchRetryMax  = time.Minute
	DefaultDeliverTimeout = time.Minute
	DefaultCloseTimeout   = 5 * time.Second
)

// Options configures a Service.
type Options struct {
	// Store holds subscriptions, claims and the VAPID key (required).
	Store Store
	// Auth authenticates /api/push calls and checks recipients (required).
	Auth Authenticator
	// Log receives delivery failures (never subscription keys); nil
	// discards.
	Log *slog.Logger
	// Registerer, if set, gets the metrics (docs/metrics.md).
	Registerer prometheus.Registerer
	// Subject is the VAPID contact: "mailto:ops@example.com" or an https
	// URL (betcode-relay --push-subject). Empty disables push: Info
	// reports it off, no tunnel is watched and subscribing is refused.
	Subject string
	// TTL is how long a push service keeps an undelivered notification
	// (default DefaultTTL).
	TTL time.Duration
	// Concurrency bounds the POSTs in flight to push services (default
	// DefaultConcurrency).
	Concurrency int
	// SendTimeout bounds one POST (default DefaultSendTimeout).
	SendTimeout time.Duration
	// DeliverTimeout bounds one notification's delivery to all its
	// subscriptions, waiting for a send slot included (default
	// DefaultDeliverTimeout).
	DeliverTimeout time.Duration
	// MaxPending bounds the notifications waiting or being delivered;
	// more are dropped and counted failed (default DefaultMaxPending).
	MaxPending int
	// Retention is how long deduplication claims and expired
	// subscriptions are kept (default DefaultRetention). A prompt still
	// pending after that is notified again when its machine reconnects.
	Retention time.Duration
	// PruneInterval is how often old claims are pruned (default
	// DefaultPruneInterval); negative disables pruning.
	PruneInterval time.Duration
	// WatchRetryMin and WatchRetryMax bound the backoff between
	// WatchSessions attempts on a live tunnel.
	WatchRetryMin, WatchRetryMax time.Duration
	// CloseTimeout is how long Close lets the notifications under way
	// finish before it cancels them (default DefaultCloseTimeout).
	CloseTimeout time.Duration
	// HTTPClient posts to push services (default: a client with
	// SendTimeout and no redirects).
	HTTPClient *http.Client
	// AllowPrivateEndpoints lets machines' own messages (SendRelayed) go
	// to http endpoints and non-public addresses: tests' loopback push
	// services only. Off, the relay connects only to public addresses.
	AllowPrivateEndpoints bool
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Validate reports unusable options.
func (o Options) Validate() error {
	switch {
	case o.Store == nil:
		return errors.New("push: Options.Store is required")
	case o.Auth == nil:
		return errors.New("push: Options.Auth is required")
	case o.Subject != "" && !strings.HasPrefix(o.Subject, "mailto:") && !strings.HasPrefix(o.Subject, "https://"):
		return fmt.Errorf("push: subject %q: want mailto:ADDRESS or an https:// URL (RFC 8292)", o.Subject)
	case o.TTL < 0 || o.Concurrency < 0 || o.SendTimeout < 0 || o.DeliverTimeout < 0 || o.MaxPending < 0 || o.Retention < 0 ||
		o.WatchRetryMin < 0 || o.WatchRetryMax < 0 || o.CloseTimeout < 0:
		return errors.New("push: negative option")
	}
	return nil
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.TTL, DefaultTTL)
	def(&o.SendTimeout, DefaultSendTimeout)
	def(&o.DeliverTimeout, DefaultDeliverTimeout)
	def(&o.Retention, DefaultRetention)
	def(&o.PruneInterval, DefaultPruneInterval)
	def(&o.WatchRetryMin, DefaultWatchRetryMin)
	def(&o.WatchRetryMax, DefaultWatchRetryMax)
	def(&o.CloseTimeout, DefaultCloseTimeout)
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MaxPending == 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{
			Timeout: o.SendTimeout,
			// A push service answers; it never redirects a capability URL
			// elsewhere, and following one would carry the VAPID token.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return o
}

// Service sends Web Push notifications, watches machines for what to
// notify, and serves /api/push. Close stops it.
type Service struct {
	opt         Options
	key         store.VAPIDKey // zero when disabled
	relayClient *http.Client   // machines' own messages (relayed.go)
	metrics     *metrics
	sem         chan struct{} // send slots
	pending     atomic.Int64  // notifications queued or being delivered

	ctx         context.Context // watches and pruning: ends when Close starts
	cancel      context.CancelFunc
	sendCtx     context.Context // deliveries: ends CloseTimeout into Close
	cancelSends context.CancelFunc
	wg          sync.WaitGroup // every goroutine the service started

	mu       sync.Mutex
	watching map[string]*watcher // machine id -> its tunnel's watcher
	closed   bool

	delivered func(kind string)      // tests: called when a notification's delivery is over
	unwatched func(machineID string) // tests: called when a tunnel's watch has ended
}

// New returns a Service. When opt.Subject is set it loads the VAPID key
// from the store, generating and storing one on the first start (every
// replica sharing the store then signs with it), and starts pruning old
// claims.
func New(ctx context.Context, opt Options) (*Service, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	opt = opt.withDefaults()
	s := &Service{opt: opt, metrics: newMetrics(opt.Registerer), sem: make(chan struct{}, opt.Concurrency), watching: map[string]*watcher{},
		relayClient: newRelayClient(opt.SendTimeout, opt.AllowPrivateEndpoints)}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.sendCtx, s.cancelSends = context.WithCancel(context.WithoutCancel(ctx))
	if opt.Subject == "" {
		return s, nil
	}
	candidate, err := newVAPIDKey()
	if err != nil {
		return nil, err
	}
	if s.key, err = opt.Store.VAPIDKey(ctx, candidate); err != nil {
		return nil, fmt.Errorf("push: load the VAPID key: %w", err)
	}
	if opt.PruneInterval > 0 {
		s.wg.Go(s.pruneLoop)
	}
	return s, nil
}

// newVAPIDKey generates a P-256 key pair in the encoding browsers and
// webpush-go take.
func newVAPIDKey() (store.VAPIDKey, error) {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return store.VAPIDKey{}, fmt.Errorf("push: generate a VAPID key: %w", err)
	}
	return store.VAPIDKey{
		Private: base64.RawURLEncoding.EncodeToString(k.Bytes()),
		Public:  base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()),
	}, nil
}

// Info reports whether push is enabled and the VAPID public key browsers
// subscribe with (the web API's GET /api/info).
func (s *Service) Info() (enabled bool, vapidPublicKey string) {
	if s == nil || s.key.Public == "" {
		return false, ""
	}
	return true, s.key.Public
}

// Close stops every watcher and the pruning, lets the notifications under
// way finish for up to CloseTimeout, then cancels them, and returns once
// every goroutine of the service has. It is idempotent.
func (s *Service) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.wg.Wait()
	}()
	t := time.NewTimer(s.opt.CloseTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.cancelSends()
		<-done
	}
	s.cancelSends()
	return nil
}

// pruneLoop deletes old claims and expired subscriptions every
// PruneInterval until Close.
func (s *Service) pruneLoop() {
	t := time.NewTicker(s.opt.PruneInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
		n, err := s.opt.Store.PrunePush(ctx, s.opt.Now().Add(-s.opt.Retention))
		cancel()
		switch {
		case err != nil && s.ctx.Err() == nil:
			s.opt.Log.Warn("push: prune old claims", "err", err)
		case n > 0:
			s.opt.Log.Debug("push: pruned old claims and expired subscriptions", "rows", n)
		}
	}
}
