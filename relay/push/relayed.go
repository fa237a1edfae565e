package push

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Machines' own notifications (TunnelService.SendPush): a machine writes
// and encrypts each message for its devices' subscriptions (RFC 8291), and
// the relay only signs the VAPID header and POSTs the opaque body. The
// relay never sees the subscription's keys or the notification's text.

// KindRelayed is the kind label of the messages machines encrypted
// themselves (betcode_relay_push_sends_total): the relay cannot read which
// kind they are.
const KindRelayed = "relayed"

// MaxRelayedPayload is the largest body a machine may send: a push
// message's 4096 bytes (RFC 8291 section 4).
const MaxRelayedPayload = 4096

// MaxRelayedTTL bounds a relayed message's TTL (four weeks, what push
// services keep at most).
const MaxRelayedTTL = 28 * 24 * time.Hour

// ErrDisabled is SendRelayed's error when push is off on this relay.
var ErrDisabled = errors.New("push notifications are not enabled on this relay (betcode-relay --push-subject)")

// errPrivateAddress refuses a push endpoint on a non-public address.
var errPrivateAddress = errors.New("endpoint is not on a public address")

// SendRelayed delivers a message a machine encrypted itself to its push
// service, as it is, with the relay's VAPID signature, and returns the push
// service's status and whether the subscription is gone (404, 410). A
// request the relay refuses (a bad endpoint, an oversized payload, a bad
// urgency or topic) wraps store.ErrInvalid. The payload is never logged.
func (s *Service) SendRelayed(ctx context.Context, machineID string, req *pb.SendPushRequest) (status int, gone bool, err error) {
	if s.key.Public == "" {
		return 0, false, ErrDisabled
	}
	if err := s.checkRelayed(req); err != nil {
		s.metrics.send(KindRelayed, OutcomeFailed)
		return 0, false, fmt.Errorf("%w: %w", store.ErrInvalid, err)
	}
	auth, err := vapidAuthorization(s.key, s.opt.Subject, req.Endpoint, s.opt.Now())
	if err != nil {
		s.metrics.send(KindRelayed, OutcomeFailed)
		return 0, false, err
	}
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		s.metrics.send(KindRelayed, OutcomeFailed)
		return 0, false, ctx.Err()
	}
	sctx, cancel := context.WithTimeout(ctx, s.opt.SendTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(sctx, http.MethodPost, req.Endpoint, bytes.NewReader(req.Payload))
	if err != nil {
		s.metrics.send(KindRelayed, OutcomeFailed)
		return 0, false, fmt.Errorf("%w: %w", store.ErrInvalid, err)
	}
	hr.Header.Set("Authorization", auth)
	hr.Header.Set("Content-Encoding", "aes128gcm")
	hr.Header.Set("Content-Type", "application/octet-stream")
	hr.Header.Set("TTL", strconv.Itoa(int(req.TtlSeconds)))
	if req.Urgency != "" {
		hr.Header.Set("Urgency", req.Urgency)
	}
	if req.Topic != "" {
		hr.Header.Set("Topic", req.Topic)
	}
	resp, err := s.relayClient.Do(hr)
	if err != nil {
		// A *url.Error names the endpoint, a capability URL: keep it out
		// of logs and errors.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		s.metrics.send(KindRelayed, OutcomeFailed)
		s.opt.Log.Warn("push: relayed send failed", "machine_id", machineID, "endpoint_host", store.EndpointHost(req.Endpoint), "err", err)
		return 0, false, fmt.Errorf("post to the push service: %w", err)
	}
	resp.Body.Close()
	gone = resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		s.metrics.send(KindRelayed, OutcomeSent)
	case gone:
		s.metrics.send(KindRelayed, OutcomeExpired)
	default:
		s.metrics.send(KindRelayed, OutcomeFailed)
		s.opt.Log.Info("push: relayed send refused", "machine_id", machineID, "endpoint_host", store.EndpointHost(req.Endpoint), "status", resp.StatusCode)
	}
	return resp.StatusCode, gone, nil
}

// checkRelayed reports why a machine's message cannot be sent.
func (s *Service) checkRelayed(req *pb.SendPushRequest) error {
	if err := validEndpoint(req.Endpoint); err != nil {
		return err
	}
	u, _ := url.Parse(req.Endpoint)
	if !s.opt.AllowPrivateEndpoints {
		if u.Scheme != "https" {
			return errors.New("endpoint must be an https URL")
		}
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil && !publicAddr(ip) {
			return errPrivateAddress
		}
		if u.Hostname() == "localhost" {
			return errPrivateAddress
		}
	}
	switch {
	case len(req.Payload) == 0:
		return errors.New("payload is empty")
	case len(req.Payload) > MaxRelayedPayload:
		return fmt.Errorf("payload is %d bytes, over %d", len(req.Payload), MaxRelayedPayload)
	case req.TtlSeconds < 0 || time.Duration(req.TtlSeconds)*time.Second > MaxRelayedTTL:
		return fmt.Errorf("ttl_seconds %d: want 0 to %d", req.TtlSeconds, int(MaxRelayedTTL/time.Second))
	}
	switch req.Urgency {
	case "", "very-low", "low", "normal", "high":
	default:
		return fmt.Errorf("urgency %q: want very-low, low, normal or high", req.Urgency)
	}
	if len(req.Topic) > 32 {
		return errors.New("topic is over 32 characters")
	}
	for _, c := range req.Topic {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return errors.New("topic is not base64url")
		}
	}
	return nil
}

// publicAddr reports whether ip is a public unicast address.
func publicAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsGlobalUnicast() && !ip.IsPrivate() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() &&
		!netip.MustParsePrefix("100.64.0.0/10").Contains(ip) && !netip.MustParsePrefix("fc00::/7").Contains(ip)
}

// newRelayClient is the HTTP client of machines' messages: no redirects
// (a push service never redirects, and following one would carry the VAPID
// token), and, unless allowPrivate, a dialer that connects only to public
// addresses, whatever the endpoint's name resolves to: a machine cannot
// make the relay POST into its own network.
func newRelayClient(timeout time.Duration, allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: timeout}
	if !allowPrivate {
		dialer.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			if !publicAddr(ap.Addr()) {
				return errPrivateAddress
			}
			return nil
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialContext = dialer.DialContext
	return &http.Client{
		Timeout:       timeout,
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
