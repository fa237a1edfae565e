package pushtest

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Message is one push message the service accepted and decrypted.
type Message struct {
	// Subscription is the id of the subscription it was sent to.
	Subscription string
	// Payload is the decrypted body.
	Payload []byte
	// TTL, Urgency and Topic are the RFC 8030 headers as sent.
	TTL, Urgency, Topic string
	// VAPID is the verified authorization.
	VAPID VAPID
}

// Subscription is a browser's push subscription on the Server.
type Subscription struct {
	ID string
	// Endpoint, P256dh and Auth are what PushSubscription.toJSON() gives
	// (keys base64url without padding).
	Endpoint, P256dh, Auth string

	key  *ecdh.PrivateKey
	auth []byte
}

// Server is the loopback push service. Its methods are safe for
// concurrent use.
type Server struct {
	// URL is the service's base URL (http://127.0.0.1:port).
	URL string
	// Now is the clock VAPID expiry is checked against (default time.Now).
	Now func() time.Time

	srv  *httptest.Server
	msgs chan Message

	mu       sync.Mutex
	subs     map[string]*Subscription
	status   map[string]int // subscription id -> status to answer
	failures []string       // malformed requests, reported at cleanup
	posts    int
}

// New starts a Server on 127.0.0.1, closed in tb.Cleanup, which also fails
// the test if any request was malformed (bad VAPID, undecryptable body).
func New(tb testing.TB) *Server {
	s := &Server{Now: time.Now, msgs: make(chan Message, 1000), subs: map[string]*Subscription{}, status: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	tb.Cleanup(func() {
		s.srv.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, f := range s.failures {
			tb.Errorf("pushtest: malformed push request: %s", f)
		}
	})
	return s
}

// Subscribe makes a new subscription, as a browser's pushManager.subscribe
// does.
func (s *Server) Subscribe(tb testing.TB) *Subscription {
	tb.Helper()
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	auth := make([]byte, 16)
	if _, err := rand.Read(auth); err != nil {
		tb.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := fmt.Sprintf("sub%d", len(s.subs)+1)
	sub := &Subscription{
		ID: id, Endpoint: s.URL + "/push/" + id,
		P256dh: base64.RawURLEncoding.EncodeToString(key.PublicKey().Bytes()),
		Auth:   base64.RawURLEncoding.EncodeToString(auth),
		key:    key, auth: auth,
	}
	s.subs[id] = sub
	return sub
}

// SetStatus makes the service answer code to every later message for
// subscription id (e.g. http.StatusGone), without delivering them; 0
// restores normal delivery.
func (s *Server) SetStatus(id string, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status[id] = code
}

// Posts returns how many messages were POSTed, delivered or not.
func (s *Server) Posts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posts
}

// Messages returns the delivered messages, in arrival order.
func (s *Server) Messages() <-chan Message { return s.msgs }

// Next returns the next delivered message, failing tb after timeout.
func (s *Server) Next(tb testing.TB, timeout time.Duration) Message {
	tb.Helper()
	select {
	case m := <-s.msgs:
		return m
	case <-time.After(timeout):
		tb.Fatalf("pushtest: no push message within %v", timeout)
		return Message{}
	}
}

func (s *Server) fail(w http.ResponseWriter, code int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.failures = append(s.failures, msg)
	s.mu.Unlock()
	http.Error(w, msg, code)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutPrefix(r.URL.Path, "/push/")
	s.mu.Lock()
	s.posts++
	sub := s.subs[id]
	code := s.status[id]
	s.mu.Unlock()
	switch {
	case r.Method != http.MethodPost:
		s.fail(w, http.StatusMethodNotAllowed, "%s %s: want POST", r.Method, r.URL.Path)
		return
	case !ok || sub == nil:
		http.Error(w, "no such subscription", http.StatusNotFound) // a real service's answer, not a malformed request
		return
	case code != 0:
		http.Error(w, http.StatusText(code), code)
		return
	}
	vapid, err := VerifyVAPID(r.Header.Get("Authorization"), sub.Endpoint, s.Now())
	if err != nil {
		s.fail(w, http.StatusUnauthorized, "%s: %v", id, err)
		return
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "aes128gcm" {
		s.fail(w, http.StatusUnsupportedMediaType, "%s: Content-Encoding %q, want aes128gcm", id, ce)
		return
	}
	if r.Header.Get("TTL") == "" {
		s.fail(w, http.StatusBadRequest, "%s: no TTL header", id)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8192))
	if err != nil {
		s.fail(w, http.StatusBadRequest, "%s: read body: %v", id, err)
		return
	}
	plain, err := Decrypt(body, sub.key, sub.auth)
	if err != nil {
		s.fail(w, http.StatusBadRequest, "%s: %v", id, err)
		return
	}
	m := Message{Subscription: id, Payload: plain, TTL: r.Header.Get("TTL"), Urgency: r.Header.Get("Urgency"), Topic: r.Header.Get("Topic"), VAPID: vapid}
	select {
	case s.msgs <- m:
	default:
		s.fail(w, http.StatusInsufficientStorage, "%s: the test did not read its messages", id)
		return
	}
	w.Header().Set("Location", sub.Endpoint+"/msg")
	w.WriteHeader(http.StatusCreated)
}
