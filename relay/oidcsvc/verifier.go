package oidcsvc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// errDiscovery marks a failure to reach or read the identity provider's
// discovery document: the relay's problem (UNAVAILABLE), not the caller's.
var errDiscovery = errors.New("identity provider discovery failed")

// verifier verifies ID tokens of one issuer and client. It discovers the
// issuer lazily, at the first sign-in, so a relay starts while its identity
// provider is down; a failed discovery is retried by a later sign-in once
// retryAfter has passed.
type verifier struct {
	issuer, clientID string
	timeout          time.Duration
	retryAfter       time.Duration
	client           *http.Client
	now              func() time.Time

	used seenTokens

	mu      sync.Mutex
	v       *oidc.IDTokenVerifier
	ep      oauth2.Endpoint // the provider's, with DeviceAuthURL if it has one
	lastErr error
	lastTry time.Time
}

func newVerifier(c Config, now func() time.Time) *verifier {
	return &verifier{
		issuer: c.Issuer, clientID: c.ClientID, timeout: c.DiscoveryTimeout, retryAfter: c.RetryAfter, now: now,
		// Every request to the provider (discovery, keys) is bounded, also
		// those go-oidc makes later without a context of ours.
		client: &http.Client{Timeout: c.DiscoveryTimeout},
	}
}

// get returns the verifier, discovering the issuer if need be. Concurrent
// callers wait for one discovery.
func (v *verifier) get(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.v != nil {
		return v.v, nil
	}
	if v.lastErr != nil && v.now().Sub(v.lastTry) < v.retryAfter {
		return nil, v.lastErr
	}
	// The discovery serves every waiting caller: the first one hanging up
	// must not fail it (and have the failure remembered for all).
	ctx, cancel := context.WithTimeout(oidc.ClientContext(context.WithoutCancel(ctx), v.client), v.timeout)
	defer cancel()
	p, err := oidc.NewProvider(ctx, v.issuer)
	v.lastTry = v.now()
	if err != nil {
		v.lastErr = fmt.Errorf("%w: %s: %v", errDiscovery, v.issuer, err)
		return nil, v.lastErr
	}
	v.lastErr = nil
	v.ep = p.Endpoint()
	v.v = p.VerifierContext(oidc.ClientContext(context.Background(), v.client), &oidc.Config{ClientID: v.clientID, Now: v.now})
	return v.v, nil
}

// endpoint returns the provider's OAuth 2.0 endpoints, discovering the
// issuer if need be.
func (v *verifier) endpoint(ctx context.Context) (oauth2.Endpoint, error) {
	if _, err := v.get(ctx); err != nil {
		return oauth2.Endpoint{}, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ep, nil
}

// verify checks raw's signature (with the issuer's keys), issuer, audience
// (the client id), authorized party and expiry, and that it was not
// exchanged before, and returns its payload.
func (v *verifier) verify(ctx context.Context, raw string) ([]byte, error) {
	iv, err := v.get(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := iv.Verify(oidc.ClientContext(ctx, v.client), raw)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "oidc: "))
	}
	var c struct {
		AZP string `json:"azp"`
	}
	if err := tok.Claims(&c); err != nil {
		return nil, fmt.Errorf("read claims: %w", err)
	}
	// With several audiences the authorized party says which client the
	// token was issued to (OpenID Connect Core 3.1.3.7): it must be ours.
	if c.AZP != "" && c.AZP != v.clientID {
		return nil, fmt.Errorf("issued to client %q (azp), not %q", c.AZP, v.clientID)
	}
	if !v.used.first(raw, tok.Expiry, v.now()) {
		return nil, errors.New("this ID token was already exchanged; sign in again")
	}
	var payload rawClaims
	if err := tok.Claims(&payload); err != nil {
		return nil, fmt.Errorf("read claims: %w", err)
	}
	return payload, nil
}

// rawClaims keeps a token's payload as it is.
type rawClaims []byte

func (r *rawClaims) UnmarshalJSON(b []byte) error {
	*r = append((*r)[:0], b...)
	return nil
}
