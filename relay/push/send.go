package push

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"

	"github.com/betcode-dev/betcode/relay/store"
)

// notify queues ev's delivery to the users who may act on it and returns
// at once: a watcher (and so the tunnel) never waits for a push service.
// At most MaxPending notifications wait; more are dropped and counted
// failed.
func (s *Service) notify(machineID string, ev event) {
	s.start(ev.n.Type, func(ctx context.Context) {
		users, err := s.recipients(ctx, machineID, ev.createdBy)
		if err != nil {
			s.metrics.send(ev.n.Type, OutcomeFailed)
			s.opt.Log.Warn("push: find recipients", "machine_id", machineID, "session_id", ev.n.SessionID, "kind", ev.n.Type, "err", err)
			return
		}
		s.deliver(ctx, users, ev)
	})
}

// start runs fn in a goroutine owned by the service, with the delivery
// timeout, unless MaxPending are running or the service is closed.
func (s *Service) start(kind string, fn func(ctx context.Context)) bool {
	if s.pending.Add(1) > int64(s.opt.MaxPending) {
		s.pending.Add(-1)
		s.metrics.send(kind, OutcomeFailed)
		s.opt.Log.Warn("push: too many notifications pending, dropped one", "kind", kind, "max_pending", s.opt.MaxPending)
		return false
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.pending.Add(-1)
		return false
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer s.pending.Add(-1)
		ctx, cancel := context.WithTimeout(s.sendCtx, s.opt.DeliverTimeout)
		defer cancel()
		fn(ctx)
		if s.delivered != nil {
			s.delivered(kind)
		}
	}()
	return true
}

// recipients returns who gets a notification of machineID's session
// created by createdBy: the creator while they may still reach the
// machine, else every user who may (its owner, or its team's members).
func (s *Service) recipients(ctx context.Context, machineID, createdBy string) ([]string, error) {
	m, err := s.opt.Store.GetMachine(ctx, machineID)
	if err != nil {
		return nil, fmt.Errorf("look up machine: %w", err)
	}
	if !m.RevokedAt.IsZero() {
		return nil, nil
	}
	reach := func(user string) (bool, error) { return s.opt.Auth.CanReach(ctx, user, m.OwnerID, m.TeamID) }
	if createdBy != "" {
		ok, err := reach(createdBy)
		if err != nil {
			return nil, err
		}
		if ok {
			return []string{createdBy}, nil
		}
	}
	candidates := []string{m.OwnerID}
	if m.TeamID != "" {
		members, err := s.opt.Store.Members(ctx, m.TeamID)
		if err != nil {
			return nil, fmt.Errorf("list team members: %w", err)
		}
		candidates = candidates[:0]
		for _, mb := range members {
			candidates = append(candidates, mb.UserID)
		}
	}
	var users []string
	for _, u := range candidates {
		if u == "" {
			continue
		}
		ok, err := reach(u)
		if err != nil {
			return nil, err
		}
		if ok {
			users = append(users, u)
		}
	}
	return users, nil
}

// deliver sends ev to every live subscription of users that wants its
// kind, once per subscription and key (ClaimPushKey; an event without a
// key, a test, is always sent), and waits for the sends.
func (s *Service) deliver(ctx context.Context, users []string, ev event) {
	kind := ev.n.Type
	payload, err := json.Marshal(ev.n)
	if err != nil {
		s.metrics.send(kind, OutcomeFailed)
		return
	}
	// A resolution goes where its prompt went.
	wants := kind
	if kind == KindResolved {
		wants = ev.prompt
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, user := range users {
		subs, err := s.opt.Store.PushSubscriptions(ctx, user)
		if err != nil {
			s.metrics.send(kind, OutcomeFailed)
			s.opt.Log.Warn("push: list subscriptions", "user", user, "err", err)
			continue
		}
		live := 0
		for _, sub := range subs {
			if sub.LastStatus == store.PushExpired {
				continue
			}
			live++
			if kind != KindTest && !sub.Wants(wants) {
				s.metrics.send(kind, OutcomeSuppressed)
				continue
			}
			if ev.key != "" {
				won, err := s.opt.Store.ClaimPushKey(ctx, sub.ID, ev.key, s.opt.Now())
				if err != nil {
					s.metrics.send(kind, OutcomeFailed)
					s.opt.Log.Warn("push: claim", "subscription", sub, "kind", kind, "err", err)
					continue
				}
				if !won {
					s.metrics.send(kind, OutcomeSuppressed)
					continue
				}
			}
			wg.Go(func() { s.send(ctx, sub, payload, ev) })
		}
		if live == 0 {
			s.metrics.send(kind, OutcomeNoSubscription)
		}
	}
}

// send POSTs one encrypted message, in one of Concurrency slots, and
// records the outcome on the subscription.
func (s *Service) send(ctx context.Context, sub store.PushSubscription, payload []byte, ev event) {
	kind := ev.n.Type
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		s.outcome(sub, kind, OutcomeFailed, "no send slot before the delivery timeout")
		return
	}
	sctx, cancel := context.WithTimeout(ctx, s.opt.SendTimeout)
	defer cancel()
	resp, err := webpush.SendNotificationWithContext(sctx, bytes.Clone(payload), // webpush-go appends to the slice it is given
		&webpush.Subscription{Endpoint: sub.Endpoint, Keys: webpush.Keys{Auth: sub.Auth, P256dh: sub.P256dh}},
		&webpush.Options{
			HTTPClient: s.opt.HTTPClient,
			// webpush-go adds "mailto:" to any subject not starting with
			// "https:".
			Subscriber:      strings.TrimPrefix(s.opt.Subject, "mailto:"),
			TTL:             int(s.opt.TTL / time.Second),
			Urgency:         ev.urgency,
			Topic:           topic(ev.n.Tag),
			VAPIDPublicKey:  s.key.Public,
			VAPIDPrivateKey: s.key.Private,
		})
	if err != nil {
		// A *url.Error names the endpoint, a capability URL: keep it out
		// of logs and of the stored error.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		s.outcome(sub, kind, OutcomeFailed, "send: "+err.Error())
		return
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		s.outcome(sub, kind, OutcomeSent, "")
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		s.outcome(sub, kind, OutcomeExpired, "push service answered "+resp.Status)
	default:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		msg := "push service answered " + resp.Status
		if b := strings.TrimSpace(string(body)); b != "" {
			msg += ": " + b
		}
		s.outcome(sub, kind, OutcomeFailed, msg)
	}
}

// outcome counts a send and records it on the subscription.
func (s *Service) outcome(sub store.PushSubscription, kind, outcome, errText string) {
	s.metrics.send(kind, outcome)
	status := store.PushFailed
	switch outcome {
	case OutcomeSent:
		status = store.PushSent
		s.opt.Log.Debug("push: sent", "subscription", sub, "kind", kind)
	case OutcomeExpired:
		status = store.PushExpired
		s.opt.Log.Info("push: subscription expired, no longer sent to", "subscription", sub, "reason", errText)
	default:
		s.opt.Log.Warn("push: send failed", "subscription", sub, "kind", kind, "err", errText)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 10*time.Second)
	defer cancel()
	if err := s.opt.Store.RecordPushOutcome(ctx, sub.ID, status, s.opt.Now(), errText); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.opt.Log.Warn("push: record the outcome", "subscription", sub, "err", err)
	}
}
