package push

import (
	"context"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/webapi"
)

// BetCode error codes of /api/push answers.
const (
	CodePushDisabled         = "PUSH_DISABLED"
	CodeSubscriptionNotFound = "PUSH_SUBSCRIPTION_NOT_FOUND"
)

// maxRequestBody bounds a /api/push request body: a subscription is a few hundred
// bytes.
const maxRequestBody = 64 << 10

// Subscription is the web API's PushSubscription (docs/web-api.md): what a
// user sees of a subscription, never its keys or full endpoint.
type Subscription struct {
	ID           string   `json:"id"`
	EndpointHost string   `json:"endpointHost"`
	Name         string   `json:"name"`
	Kinds        []string `json:"kinds"`
	CreatedAt    string   `json:"createdAt"`
	LastStatus   string   `json:"lastStatus,omitempty"`
	LastAt       string   `json:"lastAt,omitempty"`
	LastError    string   `json:"lastError,omitempty"`
}

func apiSubscription(p store.PushSubscription) Subscription {
	out := Subscription{ID: p.ID, EndpointHost: store.EndpointHost(p.Endpoint), Name: p.Name, Kinds: p.Kinds,
		CreatedAt: rfc3339(p.CreatedAt), LastStatus: p.LastStatus, LastAt: rfc3339(p.LastAt), LastError: p.LastError}
	if out.Kinds == nil {
		out.Kinds = []string{}
	}
	return out
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// Handler serves the web API's /api/push resources (full paths: mount it
// at /api/push and /api/push/). Every call authenticates its bearer token
// with the relay's Authenticator; errors are the web API's
// {"error","code"}.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/push", s.authed(s.getPush))
	mux.HandleFunc("POST /api/push/subscriptions", s.authed(s.addSubscription))
	mux.HandleFunc("DELETE /api/push/subscriptions/{id}", s.authed(s.deleteSubscription))
	mux.HandleFunc("POST /api/push/test", s.authed(s.test))
	mux.HandleFunc("/api/push", s.authed(notFound))
	mux.HandleFunc("/api/push/", s.authed(notFound))
	return mux
}

func notFound(w http.ResponseWriter, r *http.Request, _ string) {
	writeError(w, http.StatusNotFound, "NOT_FOUND", "no such push resource: "+r.Method+" "+r.URL.Path)
}

// authed authenticates the call with the Authenticator's middleware and
// calls h with the caller's user id, or answers the middleware's refusal
// as JSON.
func (s *Service) authed(h func(w http.ResponseWriter, r *http.Request, userID string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var (
			id  auth.Identity
			got bool
		)
		rec := &refusal{header: http.Header{}}
		s.opt.Auth.Middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			id, got = auth.FromContext(r.Context())
		})).ServeHTTP(rec, r)
		if got && id.UserID != "" {
			h(w, r, id.UserID)
			return
		}
		if !got {
			rec.writeJSON(w)
			return
		}
		writeError(w, http.StatusUnauthorized, webapi.CodeName(codes.Unauthenticated), "a bearer token is required")
	}
}

// refusal records the gRPC status the middleware answers a refused call
// with.
type refusal struct {
	header http.Header
	code   int
}

func (r *refusal) Header() http.Header         { return r.header }
func (r *refusal) Write(b []byte) (int, error) { return len(b), nil }
func (r *refusal) WriteHeader(code int)        { r.code = code }

// writeJSON answers the recorded refusal in the web API's form.
func (r *refusal) writeJSON(w http.ResponseWriter) {
	get := func(k string) string {
		if v := r.header.Get(k); v != "" {
			return v
		}
		return r.header.Get(http.TrailerPrefix + k)
	}
	c := codes.Unknown
	var n uint32
	if _, err := fmt.Sscan(get("Grpc-Status"), &n); err == nil {
		c = codes.Code(n)
	}
	msg, err := url.PathUnescape(get("Grpc-Message"))
	if err != nil {
		msg = get("Grpc-Message")
	}
	code := webapi.CodeName(c)
	if d := get("Grpc-Status-Details-Bin"); d != "" {
		if b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d, "=")); err == nil {
			var st spb.Status
			if proto.Unmarshal(b, &st) == nil {
				for _, a := range st.GetDetails() {
					var info errdetails.ErrorInfo
					if a.UnmarshalTo(&info) == nil && info.GetReason() != "" {
						code = info.GetReason()
					}
				}
			}
		}
	}
	if ra := r.header.Get("Retry-After"); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	if c == codes.OK {
		c = codes.Unauthenticated // refused without a status: never let the call through
	}
	writeError(w, webapi.HTTPStatus(c), code, msg)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"error": msg, "code": code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// storeError answers a store failure.
func (s *Service) storeError(w http.ResponseWriter, what string, err error) {
	switch {
	case errors.Is(err, store.ErrInvalid):
		writeError(w, http.StatusBadRequest, webapi.CodeName(codes.InvalidArgument), what+": "+err.Error())
	default:
		s.opt.Log.Error("push: "+what, "err", err)
		writeError(w, http.StatusInternalServerError, webapi.CodeName(codes.Internal), what+" failed")
	}
}

func (s *Service) getPush(w http.ResponseWriter, r *http.Request, user string) {
	subs, err := s.opt.Store.PushSubscriptions(r.Context(), user)
	if err != nil {
		s.storeError(w, "list push subscriptions", err)
		return
	}
	out := make([]Subscription, 0, len(subs))
	for _, p := range subs {
		out = append(out, apiSubscription(p))
	}
	enabled, key := s.Info()
	writeJSON(w, http.StatusOK, map[string]any{"enabled": enabled, "vapidPublicKey": key, "subscriptions": out})
}

// subscribeRequest is the browser's PushSubscription.toJSON() plus a name
// and the kinds it wants.
type subscribeRequest struct {
	Endpoint string `json:"endpoint"`
	Keys     struct {
		P256dh string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`
	Name  string   `json:"name"`
	Kinds []string `json:"kinds"`
}

// decodeKey decodes a browser key: base64url, with or without padding
// (some browsers send standard base64).
func decodeKey(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if b, err := base64.RawURLEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// validEndpoint reports why endpoint cannot be a push endpoint: it must be
// https, except on a loopback host (tests, local push services).
func validEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return errors.New("endpoint is not an absolute URL")
	}
	if u.Scheme == "https" {
		return nil
	}
	if u.Scheme == "http" && mtls.LoopbackHost(u.Hostname()) {
		return nil
	}
	return errors.New("endpoint must be an https URL")
}

func (s *Service) addSubscription(w http.ResponseWriter, r *http.Request, user string) {
	if enabled, _ := s.Info(); !enabled {
		writeError(w, http.StatusConflict, CodePushDisabled, "push notifications are not enabled on this relay (betcode-relay --push-subject)")
		return
	}
	var req subscribeRequest
	if !decodeBody(w, r, &req) {
		return
	}
	bad := func(msg string) { writeError(w, http.StatusBadRequest, webapi.CodeName(codes.InvalidArgument), msg) }
	if err := validEndpoint(req.Endpoint); err != nil {
		bad(err.Error())
		return
	}
	p256, err := decodeKey(req.Keys.P256dh)
	if err == nil {
		_, err = ecdh.P256().NewPublicKey(p256)
	}
	if err != nil {
		bad("keys.p256dh is not a base64url P-256 public key")
		return
	}
	if a, err := decodeKey(req.Keys.Auth); err != nil || len(a) != 16 {
		bad("keys.auth is not a base64url 16-byte secret")
		return
	}
	for _, k := range req.Kinds {
		if !slices.Contains(Kinds, k) {
			bad(fmt.Sprintf("kinds: unknown kind %q (want %s)", k, strings.Join(Kinds, ", ")))
			return
		}
	}
	name := req.Name
	if name == "" {
		name = r.UserAgent()
	}
	sub, err := s.opt.Store.AddPushSubscription(r.Context(), store.PushSubscription{
		UserID: user, Endpoint: req.Endpoint, P256dh: req.Keys.P256dh, Auth: req.Keys.Auth, Name: clip(name, 200), Kinds: req.Kinds,
	})
	if err != nil {
		s.storeError(w, "add push subscription", err)
		return
	}
	s.opt.Log.Info("push: subscribed", "subscription", sub)
	writeJSON(w, http.StatusCreated, apiSubscription(sub))
}

func (s *Service) deleteSubscription(w http.ResponseWriter, r *http.Request, user string) {
	id := r.PathValue("id")
	switch err := s.opt.Store.DeletePushSubscription(r.Context(), user, id); {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, CodeSubscriptionNotFound, "no push subscription "+id)
	case err != nil:
		s.storeError(w, "delete push subscription", err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// test sends a test notification to the caller's subscriptions, in the
// background: its outcome shows in GET /api/push.
func (s *Service) test(w http.ResponseWriter, r *http.Request, user string) {
	if enabled, _ := s.Info(); !enabled {
		writeError(w, http.StatusConflict, CodePushDisabled, "push notifications are not enabled on this relay (betcode-relay --push-subject)")
		return
	}
	ev := event{n: Notification{Type: KindTest, Title: "BetCode", Body: "Test notification: push works on this device.", Tag: "test", URL: "/"}}
	if !s.start(KindTest, func(ctx context.Context) { s.deliver(ctx, []string{user}, ev) }) {
		writeError(w, http.StatusServiceUnavailable, webapi.CodeName(codes.Unavailable), "too many notifications pending; retry")
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{})
}

// decodeBody decodes a JSON body into v, or answers 400 or 413.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody)).Decode(v)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, webapi.CodeName(codes.InvalidArgument), "request body over 64 KiB")
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, webapi.CodeName(codes.InvalidArgument), "malformed JSON: "+err.Error())
		return false
	}
	return true
}
