package oidcsvc

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/shared/webapi"
)

// The web device flow. A browser cannot run the OAuth 2.0 device flow
// (RFC 8628) against the identity provider itself (CORS; the provider is
// often not reachable from it the same way), so the relay runs it for the
// web app:
//
//	POST /api/oidc/device       the relay asks the provider for a device
//	                            code for its public client and answers the
//	                            user code, the verification URIs and an
//	                            opaque flow id
//	POST /api/oidc/device/poll  {"flow"}: one token request to the provider;
//	                            202 pending/slow_down, or the ID token
//	                            exchanged (as ExchangeOIDCToken does) for a
//	                            client token named "web"
//
// The device code stays on the relay, in memory, under the flow id, until
// the flow ends or expires. The flow id also carries the device code, its
// expiry and interval sealed (AES-256-GCM) with a key every replica shares
// (Options.FlowKey, derived from the key in the store): a poll that reaches
// another replica than the one that started the flow unseals it there and
// goes on. Neither the device code nor a token is ever logged or put in a
// URL.

// Bounds of the web device flow.
const (
	// WebTokenName names the client tokens the web sign-in creates.
	WebTokenName = "web"
	// maxFlows bounds the device flows held at once (each is a few
	// hundred bytes): starting one more answers 429.
	maxFlows = 10_000
	// defaultInterval is the polling interval when the provider names none
	// (RFC 8628 section 3.2).
	defaultInterval = 5 * time.Second
	// defaultFlowTTL is a flow's lifetime when the provider names none.
	defaultFlowTTL = 10 * time.Minute
	// maxPollBody bounds a poll's request body.
	maxPollBody = 4 << 10
)

// Error codes of the web device flow (docs/web-api.md).
const (
	CodeAccessDenied = "ACCESS_DENIED" // the person denied the device at the provider
	CodeExpiredToken = "EXPIRED_TOKEN" // the flow's code expired; start again
	CodeIdPError     = "IDP_ERROR"     // the provider failed or answered something unusable
)

// flow is one device flow the relay runs for a browser.
type flow struct {
	deviceCode string
	interval   time.Duration
	expires    time.Time
	next       time.Time // the earliest time of the next poll
	polling    bool      // a poll is at the provider
	done       bool      // it ended: kept until it expires so its id is not taken over again
}

// flows are the device flows in progress, by flow id.
type flows struct {
	// aead seals a flow into its id so that any replica holding the same
	// key can take it over; nil: flows are bound to this process.
	aead cipher.AEAD

	mu sync.Mutex
	m  map[string]*flow
}

// sealedFlow is what a flow id carries, sealed.
type sealedFlow struct {
	DeviceCode string `json:"d"`
	Expires    int64  `json:"e"` // Unix seconds
	Interval   int64  `json:"i"` // seconds
}

// newFlows returns the flows of a service whose replicas share key (32
// bytes); an empty key binds flows to this process.
func newFlows(key []byte) (*flows, error) {
	fs := &flows{}
	if len(key) == 0 {
		return fs, nil
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("oidc: the web sign-in key: %w", err)
	}
	if fs.aead, err = cipher.NewGCM(block); err != nil {
		return nil, fmt.Errorf("oidc: the web sign-in key: %w", err)
	}
	return fs, nil
}

// seal returns the id of f: random when flows are bound to this process,
// else a random nonce and f sealed under it.
func (fs *flows) seal(f *flow) (string, error) {
	if fs.aead == nil {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		return base64.RawURLEncoding.EncodeToString(b[:]), nil
	}
	plain, err := json.Marshal(sealedFlow{DeviceCode: f.deviceCode, Expires: f.expires.Unix(), Interval: int64(f.interval / time.Second)})
	if err != nil {
		return "", err
	}
	nonce := make([]byte, fs.aead.NonceSize(), fs.aead.NonceSize()+len(plain)+fs.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(fs.aead.Seal(nonce, nonce, plain, []byte(flowAAD))), nil
}

// flowAAD binds sealed flow ids to their purpose.
const flowAAD = "betcode web device flow v1"

// open unseals a flow id another replica made; false when it is not one
// (wrong key, tampered, or not sealed at all).
func (fs *flows) open(id string, now time.Time) (*flow, bool) {
	if fs.aead == nil || len(id) > 4<<10 {
		return nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(raw) < fs.aead.NonceSize() {
		return nil, false
	}
	n := fs.aead.NonceSize()
	plain, err := fs.aead.Open(nil, raw[:n], raw[n:], []byte(flowAAD))
	if err != nil {
		return nil, false
	}
	var sf sealedFlow
	if err := json.Unmarshal(plain, &sf); err != nil || sf.DeviceCode == "" || sf.Interval <= 0 {
		return nil, false
	}
	return &flow{deviceCode: sf.DeviceCode, interval: time.Duration(sf.Interval) * time.Second, expires: time.Unix(sf.Expires, 0), next: now}, true
}

// DeviceStart is the answer of POST /api/oidc/device.
type DeviceStart struct {
	Flow                    string `json:"flow"`
	UserCode                string `json:"userCode"`
	VerificationURI         string `json:"verificationUri"`
	VerificationURIComplete string `json:"verificationUriComplete,omitempty"`
	// Interval is the seconds to wait between polls; ExpiresIn the seconds
	// the flow lives.
	Interval  int `json:"interval"`
	ExpiresIn int `json:"expiresIn"`
}

// DeviceToken is the answer of a poll that signed in.
type DeviceToken struct {
	Token     string `json:"token"`
	UserID    string `json:"userId"`
	ExpiresAt string `json:"expiresAt,omitempty"`
}

// Handler serves the web device flow at /api/oidc/device and
// /api/oidc/device/poll (full paths: mount it at /api/oidc/). Both are
// open, as the gRPC RPCs are; a relay without OIDC answers 404. Errors are
// the web API's {"error","code"}.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/oidc/device", s.startDevice)
	mux.HandleFunc("POST /api/oidc/device/poll", s.pollDevice)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no such OIDC resource: "+r.Method+" "+r.URL.Path)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.v == nil {
			writeError(w, http.StatusNotFound, "NOT_FOUND", "this relay has no OIDC sign-in; log in with a token")
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		mux.ServeHTTP(w, r)
	})
}

// oauthConfig is the provider's device flow for the relay's client.
func (s *Service) oauthConfig(ctx context.Context) (*oauth2.Config, error) {
	ep, err := s.v.endpoint(ctx)
	if err != nil {
		return nil, err
	}
	if ep.DeviceAuthURL == "" {
		return nil, fmt.Errorf("the identity provider %s does not offer the device flow (no device_authorization_endpoint)", s.cfg.Issuer)
	}
	// A public client: its id goes in the form, no secret anywhere.
	ep.AuthStyle = oauth2.AuthStyleInParams
	return &oauth2.Config{ClientID: s.cfg.ClientID, Endpoint: ep, Scopes: s.cfg.Scopes}, nil
}

func (s *Service) startDevice(w http.ResponseWriter, r *http.Request) {
	oc, err := s.oauthConfig(r.Context())
	if err != nil {
		s.idpFailed(w, "start a web sign-in", err)
		return
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(r.Context(), s.v.client), s.cfg.DiscoveryTimeout)
	defer cancel()
	da, err := oc.DeviceAuth(ctx)
	if err != nil {
		s.idpFailed(w, "start a web sign-in", err)
		return
	}
	now := s.now()
	f := &flow{deviceCode: da.DeviceCode, interval: defaultInterval, next: now, expires: now.Add(defaultFlowTTL)}
	if da.Interval > 0 {
		f.interval = time.Duration(da.Interval) * time.Second
	}
	if !da.Expiry.IsZero() {
		// The oauth2 package dates the expiry by the wall clock; the flow
		// keeps the lifetime by the service's.
		f.expires = now.Add(time.Until(da.Expiry).Round(time.Second))
	}
	id, err := s.flows.add(f, now)
	if err != nil {
		writeError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", err.Error())
		return
	}
	s.log.Info("oidc: web sign-in started", "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, DeviceStart{
		Flow: id, UserCode: da.UserCode, VerificationURI: da.VerificationURI, VerificationURIComplete: da.VerificationURIComplete,
		Interval: int(f.interval / time.Second), ExpiresIn: int(f.expires.Sub(now) / time.Second),
	})
}

func (s *Service) pollDevice(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Flow string `json:"flow"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxPollBody)).Decode(&req); err != nil || req.Flow == "" {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", `want {"flow": "..."}, the flow POST /api/oidc/device answered`)
		return
	}
	now := s.now()
	f, code, msg := s.flows.take(req.Flow, now)
	switch code {
	case http.StatusNotFound:
		writeError(w, code, "NOT_FOUND", msg)
		return
	case http.StatusGone:
		writeError(w, code, CodeExpiredToken, msg)
		return
	case http.StatusAccepted:
		writeJSON(w, code, map[string]any{"status": "slow_down", "interval": int(f.interval / time.Second)})
		return
	}
	res, err := s.tokenRequest(r.Context(), f.deviceCode)
	if err != nil {
		s.flows.release(req.Flow, 0, s.now())
		s.idpFailed(w, "poll a web sign-in", err)
		return
	}
	switch res.Error {
	case "":
	case "authorization_pending":
		s.flows.release(req.Flow, 0, s.now())
		writeJSON(w, http.StatusAccepted, map[string]any{"status": "pending", "interval": int(f.interval / time.Second)})
		return
	case "slow_down":
		// RFC 8628 section 3.5: every later poll waits 5 s more.
		iv := s.flows.release(req.Flow, 5*time.Second, s.now())
		writeJSON(w, http.StatusAccepted, map[string]any{"status": "slow_down", "interval": int(iv / time.Second)})
		return
	case "access_denied":
		s.flows.remove(req.Flow)
		writeError(w, http.StatusForbidden, CodeAccessDenied, "the sign-in was denied at the identity provider")
		return
	case "expired_token":
		s.flows.remove(req.Flow)
		writeError(w, http.StatusGone, CodeExpiredToken, "the code expired before the sign-in finished; start again")
		return
	default:
		s.flows.remove(req.Flow)
		s.idpFailed(w, "poll a web sign-in", fmt.Errorf("the identity provider answered %s", res.Error))
		return
	}
	// The device code is spent whatever the exchange says.
	s.flows.remove(req.Flow)
	if res.IDToken == "" {
		s.idpFailed(w, "poll a web sign-in", fmt.Errorf("the identity provider returned no ID token (it must allow client %q the openid scope)", s.cfg.ClientID))
		return
	}
	secret, t, user, err := s.exchange(r.Context(), res.IDToken, WebTokenName, r.RemoteAddr)
	if err != nil {
		st := status.Convert(err)
		writeError(w, webapi.HTTPStatus(st.Code()), webapi.CodeName(st.Code()), st.Message())
		return
	}
	out := DeviceToken{Token: secret, UserID: user}
	if !t.ExpiresAt.IsZero() {
		out.ExpiresAt = t.ExpiresAt.UTC().Format(time.RFC3339)
	}
	writeJSON(w, http.StatusOK, out)
}

// tokenResponse is the provider's answer to a device token request
// (RFC 8628 section 3.5, RFC 6749 section 5).
type tokenResponse struct {
	IDToken string `json:"id_token"`
	Error   string `json:"error"`
}

// tokenRequest makes one device access token request: the oauth2 package
// only offers a loop that waits for the end of the flow.
func (s *Service) tokenRequest(ctx context.Context, deviceCode string) (*tokenResponse, error) {
	oc, err := s.oauthConfig(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DiscoveryTimeout)
	defer cancel()
	form := url.Values{
		"grant_type":  {"urn:ietf:params:oauth:grant-type:device_code"},
		"device_code": {deviceCode},
		"client_id":   {s.cfg.ClientID},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, oc.Endpoint.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := s.v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("token request: %w", err)
	}
	defer resp.Body.Close()
	var out tokenResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("token response (HTTP %d): %w", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK && out.Error == "" {
		return nil, fmt.Errorf("token response: HTTP %d", resp.StatusCode)
	}
	return &out, nil
}

// idpFailed answers a failure to reach or use the identity provider.
func (s *Service) idpFailed(w http.ResponseWriter, what string, err error) {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		// Its message quotes the whole response; the code says enough.
		err = fmt.Errorf("the identity provider answered %s %s", re.ErrorCode, re.ErrorDescription)
	}
	s.log.Warn("oidc: "+what, "issuer", s.cfg.Issuer, "err", err)
	if errors.Is(err, errDiscovery) {
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", fmt.Sprintf("the relay cannot reach its identity provider (%s); try again later", s.cfg.Issuer))
		return
	}
	writeError(w, http.StatusBadGateway, CodeIdPError, "the identity provider failed: "+err.Error())
}

// add keeps f under a new id (see seal).
func (fs *flows) add(f *flow, now time.Time) (string, error) {
	id, err := fs.seal(f)
	if err != nil {
		return "", err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.m == nil {
		fs.m = map[string]*flow{}
	}
	if len(fs.m) >= maxFlows {
		for k, o := range fs.m {
			if !now.Before(o.expires) {
				delete(fs.m, k)
			}
		}
		if len(fs.m) >= maxFlows {
			return "", errors.New("too many sign-ins in progress; try again in a minute")
		}
	}
	fs.m[id] = f
	return id, nil
}

// take claims flow id for one poll at now. It answers 200 and a copy of
// the flow when the poll may go to the provider, 202 (slow down) when it
// comes before the interval has passed or while another poll of it is at
// the provider, 404 for an unknown flow, 410 (forgetting it) for an
// expired one. A flow another replica started is taken over here.
func (fs *flows) take(id string, now time.Time) (flow, int, string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f, ok := fs.m[id]
	if !ok && len(fs.m) < maxFlows {
		if f, ok = fs.open(id, now); ok {
			if fs.m == nil {
				fs.m = map[string]*flow{}
			}
			fs.m[id] = f
		}
	}
	switch {
	case !ok || f.done:
		return flow{}, http.StatusNotFound, "no such sign-in (it ended, or was started with another key); start again"
	case !now.Before(f.expires):
		delete(fs.m, id)
		return flow{}, http.StatusGone, "the code expired before the sign-in finished; start again"
	case f.polling || now.Before(f.next):
		return *f, http.StatusAccepted, ""
	}
	f.polling = true
	f.next = now.Add(f.interval)
	return *f, http.StatusOK, ""
}

// release ends a poll of flow id at now, adding slower to its interval,
// and returns the interval.
func (fs *flows) release(id string, slower time.Duration, now time.Time) time.Duration {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f, ok := fs.m[id]
	if !ok {
		return 0
	}
	f.polling = false
	f.interval += slower
	f.next = now.Add(f.interval)
	return f.interval
}

// remove ends flow id. A sealed flow is kept, marked done, until it
// expires: its id must not be taken over again by this replica.
func (fs *flows) remove(id string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f, ok := fs.m[id]; ok && fs.aead != nil {
		f.done, f.polling = true, false
		return
	}
	delete(fs.m, id)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, errCode, msg string) {
	writeJSON(w, code, map[string]string{"error": msg, "code": errCode})
}
