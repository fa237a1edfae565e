package push

import (
	"crypto/ecdh"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/betcode-dev/betcode/shared/webpush"
)

// maxRequestBody bounds a request body: a subscription is a few hundred
// bytes.
const maxRequestBody = 64 << 10

// Error codes of the handler's answers ({"error","code"}, as the relay's
// /api/push answers).
const (
	CodeInvalidArgument      = "INVALID_ARGUMENT"
	CodeSubscriptionNotFound = "PUSH_SUBSCRIPTION_NOT_FOUND"
	CodeUnauthenticated      = "UNAUTHENTICATED"
	CodeResourceExhausted    = "RESOURCE_EXHAUSTED"
	CodeInternal             = "INTERNAL"
)

// APISubscription is what a device sees of a subscription: as the relay's
// /api/push answers, never its keys or full endpoint.
type APISubscription struct {
	ID           string   `json:"id"`
	EndpointHost string   `json:"endpointHost"`
	Name         string   `json:"name"`
	Kinds        []string `json:"kinds"`
	CreatedAt    string   `json:"createdAt"`
}

func apiSubscription(s Subscription) APISubscription {
	kinds := s.Kinds
	if kinds == nil {
		kinds = []string{}
	}
	host := ""
	if u, err := url.Parse(s.Endpoint); err == nil {
		host = u.Host
	}
	return APISubscription{ID: s.ID, EndpointHost: host, Name: s.Name, Kinds: kinds, CreatedAt: s.CreatedAt.UTC().Format(time.RFC3339)}
}

// Handler serves a paired device's push subscriptions, inside its channel:
// GET /push/subscriptions (its own), POST /push/subscriptions
// ({endpoint, keys:{p256dh, auth}, name, kinds}: PushSubscription.toJSON()
// plus a name and the kinds it wants) and DELETE /push/subscriptions/{id}.
type Handler struct {
	store    *Store
	deviceID func(*http.Request) (string, bool)
	log      *slog.Logger
	mux      *http.ServeMux
}

// NewHandler returns the handler; deviceID names the calling device from
// its request (the channel's authenticated device) or reports none.
func NewHandler(store *Store, deviceID func(*http.Request) (string, bool), log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{store: store, deviceID: deviceID, log: log, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /push/subscriptions", h.authed(h.list))
	h.mux.HandleFunc("POST /push/subscriptions", h.authed(h.add))
	h.mux.HandleFunc("DELETE /push/subscriptions/{id}", h.authed(h.delete))
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *Handler) authed(fn func(w http.ResponseWriter, r *http.Request, device string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		device, ok := h.deviceID(r)
		if !ok || device == "" {
			writeError(w, http.StatusUnauthorized, CodeUnauthenticated, "push subscriptions are a paired device's, inside its channel")
			return
		}
		fn(w, r, device)
	}
}

func (h *Handler) list(w http.ResponseWriter, _ *http.Request, device string) {
	out := []APISubscription{}
	for _, s := range h.store.List() {
		if s.DeviceID == device {
			out = append(out, apiSubscription(s))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"subscriptions": out})
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

func (h *Handler) add(w http.ResponseWriter, r *http.Request, device string) {
	var req subscribeRequest
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody)).Decode(&req)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, CodeInvalidArgument, "request body over 64 KiB")
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, CodeInvalidArgument, "malformed JSON: "+err.Error())
		return
	}
	bad := func(msg string) { writeError(w, http.StatusBadRequest, CodeInvalidArgument, msg) }
	if u, err := url.Parse(req.Endpoint); err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http" {
		// The relay checks the rest (https, a public address) on each send.
		bad("endpoint is not an absolute URL")
		return
	}
	if p, err := webpush.DecodeKey(req.Keys.P256dh); err != nil {
		bad("keys.p256dh is not a base64url P-256 public key")
		return
	} else if _, err := ecdh.P256().NewPublicKey(p); err != nil {
		bad("keys.p256dh is not a base64url P-256 public key")
		return
	}
	if a, err := webpush.DecodeKey(req.Keys.Auth); err != nil || len(a) != 16 {
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
	sub, err := h.store.Add(Subscription{DeviceID: device, Endpoint: req.Endpoint, P256dh: req.Keys.P256dh, Auth: req.Keys.Auth,
		Name: clip(name, 200), Kinds: req.Kinds})
	switch {
	case errors.Is(err, ErrTooMany):
		writeError(w, http.StatusTooManyRequests, CodeResourceExhausted, err.Error())
		return
	case err != nil:
		h.log.Error("push: add a subscription", "device_id", device, "err", err)
		writeError(w, http.StatusInternalServerError, CodeInternal, "add push subscription failed")
		return
	}
	h.log.Info("push: a device subscribed", "device_id", device, "subscription", sub.ID, "endpoint_host", apiSubscription(sub).EndpointHost)
	writeJSON(w, http.StatusCreated, apiSubscription(sub))
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request, device string) {
	id := r.PathValue("id")
	switch err := h.store.Delete(device, id); {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, CodeSubscriptionNotFound, "no push subscription "+id)
	case err != nil:
		h.log.Error("push: delete a subscription", "device_id", device, "err", err)
		writeError(w, http.StatusInternalServerError, CodeInternal, "delete push subscription failed")
	default:
		w.WriteHeader(http.StatusNoContent)
	}
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
