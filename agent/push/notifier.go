package push

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/pairing"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/openprompts"
	"github.com/betcode-dev/betcode/shared/webpush"
)

// Sender delivers an encrypted push message through the relay
// (TunnelService.SendPush): relaylink.Link has it.
type Sender interface {
	SendPush(ctx context.Context, req *pb.SendPushRequest) (*pb.SendPushResponse, error)
}

// Devices lists the machine's paired devices: pairing.Store has it.
type Devices interface {
	List() []pairing.Device
}

// WatchFunc follows the machine's sessions: a snapshot of every session
// with its open prompts, then one update per change, until ctx ends or it
// fails (session.Manager.Watch with no filter).
type WatchFunc func(ctx context.Context, send func(*pb.SessionUpdate) error) error

// Defaults for zero Options fields.
const (
	DefaultTTL         = time.Hour
	DefaultRetries     = 3
	DefaultRetryMin    = time.Second
	DefaultSendTimeout = 30 * time.Second
	DefaultConcurrency = 8
	DefaultMaxPending  = 256
	// promptHorizon: a prompt older than this found waiting in a snapshot
	// is not notified again.
	promptHorizon = 24 * time.Hour
	// maxRemembered bounds the keys of notifications already sent.
	maxRemembered = 10000
)

// Options configures a Notifier.
type Options struct {
	// MachineID names the machine in the payloads (required).
	MachineID string
	// Watch follows the sessions (required).
	Watch WatchFunc
	// Store holds the subscriptions; Devices the paired devices; Sender
	// delivers (all required).
	Store   *Store
	Devices Devices
	Sender  Sender
	// Log gets delivery failures (never a payload or a subscription's
	// keys); nil discards.
	Log *slog.Logger
	// TTL is how long a push service keeps an undelivered message
	// (default DefaultTTL).
	TTL time.Duration
	// Retries is how often a send the relay or push service could not take
	// now (unavailable, 429, 5xx) is tried again, after RetryMin doubling
	// (defaults DefaultRetries, DefaultRetryMin).
	Retries  int
	RetryMin time.Duration
	// SendTimeout bounds one SendPush call (default DefaultSendTimeout).
	SendTimeout time.Duration
	// Concurrency bounds the sends in flight (default DefaultConcurrency).
	Concurrency int
	// MaxPending bounds the notifications queued or being delivered; more
	// are dropped and counted failed (default DefaultMaxPending).
	MaxPending int
	// Answers, if set, names the devices that answered a prompt, which
	// get no "resolved" push for it (they withdrew their own
	// notification).
	Answers *Answers
	// Registerer, if set, gets the notifier's metrics
	// (betcode_agent_push_sends_total).
	Registerer prometheus.Registerer
	// OpenFile, if set, keeps the prompts notified and not yet resolved
	// across restarts (OpenFile in the data directory), so that the first
	// snapshot after one withdraws those that went with the agent.
	OpenFile string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Validate reports unusable options.
func (o Options) Validate() error {
	switch {
	case o.MachineID == "":
		return errors.New("push: Options.MachineID is required")
	case o.Watch == nil || o.Store == nil || o.Devices == nil || o.Sender == nil:
		return errors.New("push: Options.Watch, Store, Devices and Sender are required")
	case o.TTL < 0 || o.Retries < 0 || o.RetryMin < 0 || o.SendTimeout < 0 || o.Concurrency < 0 || o.MaxPending < 0:
		return errors.New("push: negative option")
	}
	return nil
}

// Notifier sends the machine's notifications to its paired devices, and
// withdraws a prompt's notifications once the prompt is resolved.
type Notifier struct {
	opt     Options
	sem     chan struct{}
	wg      sync.WaitGroup // the sends under way
	pending atomic.Int64   // notifications queued or being delivered
	metrics *metrics

	// open holds the prompts notified and not yet resolved, by session
	// and request id; only Run's goroutine uses it. openDirty: changed
	// since saved to OpenFile.
	open      openprompts.Set[event]
	openDirty bool

	mu   sync.Mutex
	sent map[string]time.Time // notification key -> when sent

	delivered func(Notification) // tests: a notification's sends are over
}

// New returns a Notifier; Run runs it.
func New(opt Options) (*Notifier, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if opt.TTL == 0 {
		opt.TTL = DefaultTTL
	}
	if opt.Retries == 0 {
		opt.Retries = DefaultRetries
	}
	if opt.RetryMin == 0 {
		opt.RetryMin = DefaultRetryMin
	}
	if opt.SendTimeout == 0 {
		opt.SendTimeout = DefaultSendTimeout
	}
	if opt.Concurrency == 0 {
		opt.Concurrency = DefaultConcurrency
	}
	if opt.MaxPending == 0 {
		opt.MaxPending = DefaultMaxPending
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	m, err := newMetrics(opt.Registerer)
	if err != nil {
		return nil, fmt.Errorf("push: register metrics: %w", err)
	}
	n := &Notifier{opt: opt, sem: make(chan struct{}, opt.Concurrency), sent: map[string]time.Time{}, metrics: m,
		open: openprompts.Set[event]{}}
	if err := n.loadOpen(); err != nil {
		return nil, err
	}
	return n, nil
}

// Run watches the sessions and notifies until ctx ends, restarting a
// watch that fails with backoff; it returns ctx's error once every send
// it started has returned (they end with ctx).
func (n *Notifier) Run(ctx context.Context) error {
	defer n.wg.Wait()
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(time.Second), backoff.WithMaxInterval(time.Minute),
		backoff.WithMaxElapsedTime(0))
	for {
		failed := map[string]bool{}
		// The snapshot's sessions: a prompt notified earlier whose session
		// it no longer lists was resolved while the watch was down.
		snapshot := map[string]bool{}
		err := n.opt.Watch(ctx, func(u *pb.SessionUpdate) error {
			if u.GetSnapshotDone() {
				b.Reset()
				n.withdraw(ctx, n.open.Unlisted(snapshot))
				snapshot = nil
				n.saveOpen()
				return nil
			}
			if snapshot != nil && u.GetSession() != nil {
				snapshot[u.GetSession().GetId()] = true
			}
			n.update(ctx, u, failed)
			n.saveOpen()
			return nil
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := b.NextBackOff()
		n.opt.Log.Warn("push: session watch ended, retrying", "err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// update sends the notifications u calls for (as relay/push's watcher
// does).
func (n *Notifier) update(ctx context.Context, u *pb.SessionUpdate, failed map[string]bool) {
	machineID := n.opt.MachineID
	sess := u.GetSession()
	if sess == nil {
		return
	}
	// Every update carries the session's open prompts: the ones notified
	// and no longer open were resolved (answered here or elsewhere, by a
	// rule, by their timeout, or withdrawn with the turn or the session).
	defer func() { n.withdraw(ctx, n.open.Gone(u)) }()
	if u.GetDeleted() {
		delete(failed, sess.GetId())
		return
	}
	cause := u.GetCause()
	if cause == nil {
		// A snapshot entry (or a rename): its waiting prompts, which this
		// watch may not have seen start; the keys dedupe the ones sent.
		horizon := n.opt.Now().Add(-promptHorizon)
		for _, ev := range u.GetPending() {
			if ts := ev.GetTimestamp(); ts != nil && ts.AsTime().Before(horizon) {
				continue
			}
			if e, ok := promptEvent(machineID, sess, ev); ok {
				n.remember(e)
				n.notify(ctx, e)
			}
		}
		return
	}
	if e, ok := promptEvent(machineID, sess, cause); ok {
		n.remember(e)
		n.notify(ctx, e)
		return
	}
	e, ok := turnEvent(machineID, sess, cause)
	if !ok {
		return
	}
	id := sess.GetId()
	if e.n.Type == KindTurnFailed {
		if cause.GetTurnComplete() != nil && failed[id] {
			delete(failed, id)
			return
		}
		failed[id] = cause.GetError() != nil
	} else {
		delete(failed, id)
	}
	n.notify(ctx, e)
}

// notify starts ev's delivery, once per key, and returns at once: the
// session feed never waits for the relay. At most MaxPending
// notifications are queued or under way; more are dropped and counted.
func (n *Notifier) notify(ctx context.Context, ev event) {
	if n.pending.Add(1) > int64(n.opt.MaxPending) {
		n.pending.Add(-1)
		n.metrics.add(ev.n.Type, OutcomeFailed)
		n.opt.Log.Warn("push: too many notifications pending, dropped one", "kind", ev.n.Type, "max_pending", n.opt.MaxPending)
		return
	}
	now := n.opt.Now()
	n.mu.Lock()
	if _, dup := n.sent[ev.key]; dup {
		n.mu.Unlock()
		n.pending.Add(-1)
		return
	}
	if len(n.sent) >= maxRemembered {
		for k, at := range n.sent {
			if now.Sub(at) > promptHorizon || len(n.sent) >= maxRemembered {
				delete(n.sent, k)
			}
		}
	}
	n.sent[ev.key] = now
	n.mu.Unlock()
	n.wg.Go(func() {
		defer n.pending.Add(-1)
		n.deliver(ctx, ev)
		if n.delivered != nil {
			n.delivered(ev.n)
		}
	})
}

// deliver sends ev to every subscription of every paired, unrevoked
// device that wants its kind, and waits for the sends. Subscriptions of
// devices revoked (or paired again since) are dropped first.
func (n *Notifier) deliver(ctx context.Context, ev event) {
	devices := map[string]pairing.Device{}
	for _, d := range n.opt.Devices.List() {
		devices[d.ID] = d
	}
	dropped, err := n.opt.Store.DropDevices(func(s Subscription) bool {
		d, ok := devices[s.DeviceID]
		return ok && !d.Revoked() && !s.CreatedAt.Before(d.PairedAt)
	})
	if err != nil {
		n.opt.Log.Warn("push: drop revoked devices' subscriptions", "err", err)
	} else if dropped > 0 {
		n.opt.Log.Info("push: dropped the subscriptions of revoked devices", "subscriptions", dropped)
	}
	payload, err := json.Marshal(ev.n)
	if err != nil {
		n.opt.Log.Error("push: encode a notification", "err", err)
		return
	}
	// A prompt's resolution goes to the subscriptions its notification
	// went to, but those of the devices that answered it.
	kind, answered := ev.n.Type, map[string]bool(nil)
	if ev.n.Type == KindResolved {
		kind, answered = ev.prompt, n.opt.Answers.Take(ev.n.RequestID)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, sub := range n.opt.Store.List() {
		if d, ok := devices[sub.DeviceID]; !ok || d.Revoked() || !sub.Wants(kind) || answered[d.Fingerprint] {
			continue
		}
		wg.Go(func() { n.send(ctx, sub, payload, ev) })
	}
}

// errRetry marks an answer worth trying again.
var errRetry = errors.New("push service busy")

// send encrypts payload for sub and sends it, retrying what may pass
// later; a gone subscription is dropped.
func (n *Notifier) send(ctx context.Context, sub Subscription, payload []byte, ev event) {
	select {
	case n.sem <- struct{}{}:
		defer func() { <-n.sem }()
	case <-ctx.Done():
		return
	}
	body, err := webpush.Encrypt(webpush.Subscription{Endpoint: sub.Endpoint, P256dh: sub.P256dh, Auth: sub.Auth}, payload)
	if err != nil {
		n.metrics.add(ev.n.Type, OutcomeFailed)
		n.opt.Log.Warn("push: encrypt a notification; dropping the subscription", "subscription", sub.ID, "device_id", sub.DeviceID, "err", err)
		_ = n.opt.Store.Drop(sub.ID)
		return
	}
	req := &pb.SendPushRequest{Endpoint: sub.Endpoint, Payload: body, TtlSeconds: int32(n.opt.TTL / time.Second),
		Urgency: ev.urgency, Topic: topic(ev.n.Tag)}
	b := backoff.WithContext(backoff.WithMaxRetries(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(n.opt.RetryMin), backoff.WithMaxElapsedTime(0)), uint64(n.opt.Retries)), ctx)
	var gone bool
	err = backoff.RetryNotify(func() error {
		sctx, cancel := context.WithTimeout(ctx, n.opt.SendTimeout)
		defer cancel()
		resp, err := n.opt.Sender.SendPush(sctx, req)
		if err != nil {
			switch status.Code(err) {
			case codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded, codes.Unknown:
				return err // the relay (or the tunnel) may take it later
			}
			return backoff.Permanent(err)
		}
		switch code := int(resp.Status); {
		case resp.Gone:
			gone = true
			return nil
		case code >= 200 && code < 300:
			return nil
		case code == http.StatusTooManyRequests || code >= 500:
			return fmt.Errorf("%w: %d", errRetry, code)
		default:
			return backoff.Permanent(fmt.Errorf("push service answered %d", code))
		}
	}, b, func(error, time.Duration) { n.metrics.add(ev.n.Type, OutcomeRetried) })
	switch {
	case gone:
		n.metrics.add(ev.n.Type, OutcomeGone)
		n.opt.Log.Info("push: subscription gone, dropped", "subscription", sub.ID, "device_id", sub.DeviceID)
		if err := n.opt.Store.Drop(sub.ID); err != nil && !errors.Is(err, ErrNotFound) {
			n.opt.Log.Warn("push: drop a gone subscription", "subscription", sub.ID, "err", err)
		}
	case err != nil:
		n.metrics.add(ev.n.Type, OutcomeFailed)
		if ctx.Err() != nil {
			return
		}
		n.opt.Log.Warn("push: send failed", "subscription", sub.ID, "device_id", sub.DeviceID, "kind", ev.n.Type, "err", err)
	default:
		n.metrics.add(ev.n.Type, OutcomeSent)
		n.opt.Log.Debug("push: sent", "subscription", sub.ID, "device_id", sub.DeviceID, "kind", ev.n.Type)
	}
}
