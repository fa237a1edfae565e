package fakeopenai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Config configures a Server. The zero Config is ready to use.
type Config struct {
	// Addr is the listen address of Start; default "127.0.0.1:0".
	Addr string
	// Responder answers requests that take no queued reply; default
	// KeywordReply.
	Responder func(*Request) Reply
	// Logger receives one line per request; default: discard.
	Logger *slog.Logger
}

// Server is the fake Responses API. It is an http.Handler; Start also runs
// it on a loopback listener.
type Server struct {
	responder func(*Request) Reply
	log       *slog.Logger
	done      chan struct{} // closed by Close: stalled and delayed replies give up
	closeOnce sync.Once

	mu       sync.Mutex
	queue    []Reply
	requests []Request
	others   []string
	changed  chan struct{} // closed and replaced whenever requests grows

	// Set by Start only.
	http *http.Server
	url  string
	serr chan error
}

var _ http.Handler = (*Server)(nil)

// New returns a Server that is not listening, for use with httptest or an
// existing mux.
func New(cfg Config) *Server {
	s := &Server{
		responder: cfg.Responder,
		log:       cfg.Logger,
		done:      make(chan struct{}),
		changed:   make(chan struct{}),
	}
	if s.responder == nil {
		s.responder = KeywordReply
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Start returns a Server listening on cfg.Addr (default 127.0.0.1:0).
// Close it when done.
func Start(cfg Config) (*Server, error) {
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fake openai listen on %s: %w", addr, err)
	}
	s := New(cfg)
	s.url = "http://" + ln.Addr().String()
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.serr = make(chan error, 1)
	go func() { s.serr <- s.http.Serve(ln) }()
	s.log.Info("fake openai listening", "url", s.url)
	return s, nil
}

// URL returns the server's root URL, e.g. "http://127.0.0.1:40123"; a
// model provider's base_url is URL()+"/v1". It is "" for a Server made with
// New.
func (s *Server) URL() string { return s.url }

// BaseURL returns URL()+"/v1", the base_url of a Codex model provider.
func (s *Server) BaseURL() string { return s.url + "/v1" }

// Close ends stalled and delayed replies, stops the listener of Start and
// waits until the handlers have returned.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.done)
		if s.http == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err = s.http.Shutdown(ctx); err != nil {
			err = errors.Join(err, s.http.Close())
		}
		if serveErr := <-s.serr; !errors.Is(serveErr, http.ErrServerClosed) {
			err = errors.Join(err, serveErr)
		}
	})
	return err
}

// Enqueue appends replies that the next requests get, one each, before the
// Responder is asked again. Each attempt of Codex is a request: with retries
// enabled, enqueue an error once per attempt for a turn that must fail.
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Pending returns how many enqueued replies are still unused.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Requests returns every /v1/responses request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// OtherRequests returns "METHOD /path" for every request to a path other
// than POST /v1/responses (Codex makes none with a custom provider).
func (s *Server) OtherRequests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.others...)
}

// WaitRequests waits until at least n /v1/responses requests arrived and
// returns them all.
func (s *Server) WaitRequests(ctx context.Context, n int) ([]Request, error) {
	reqs, err := s.Wait(ctx, func(reqs []Request) bool { return len(reqs) >= n })
	if err != nil {
		return reqs, fmt.Errorf("wait for %d requests (have %d): %w", n, len(reqs), err)
	}
	return reqs, nil
}

// Wait waits until cond holds for the requests received so far and returns
// them. cond is called without locks held, on a copy.
func (s *Server) Wait(ctx context.Context, cond func([]Request) bool) ([]Request, error) {
	for {
		s.mu.Lock()
		reqs := append([]Request(nil), s.requests...)
		changed := s.changed
		s.mu.Unlock()
		if cond(reqs) {
			return reqs, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return reqs, ctx.Err()
		}
	}
}

// ServeHTTP answers POST /v1/responses with a reply and anything else with
// 404.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 256<<20))
	if err != nil {
		s.log.Warn("read request body", "path", r.URL.Path, "err", err)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		s.mu.Lock()
		s.others = append(s.others, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		s.log.Info("other request", "method", r.Method, "path", r.URL.Path)
		writeError(w, http.StatusNotFound, "fake openai: no route "+r.Method+" "+r.URL.Path, 0)
		return
	}
	req, err := ParseRequest(body)
	if err != nil {
		s.log.Warn("bad responses request", "err", err)
		writeError(w, http.StatusBadRequest, err.Error(), 0)
		return
	}
	req.Header = r.Header.Clone()

	s.mu.Lock()
	req.Seq = len(s.requests) + 1
	var reply Reply
	queued := len(s.queue) > 0
	if queued {
		reply = s.queue[0]
		s.queue = s.queue[1:]
	}
	s.requests = append(s.requests, *req)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()

	if !queued {
		reply = s.responder(req)
	}
	s.log.Info("responses request",
		"seq", req.Seq, "model", req.Model, "tools", len(req.Tools), "input", len(req.Input),
		"prompt", clip(req.Prompt(), 60), "queued", queued, "status", reply.Status, "fault", reply.Fault.String())

	if err := s.reply(w, r, req, reply); err != nil {
		s.log.Warn("write reply", "seq", req.Seq, "err", err)
	}
}

func (s *Server) reply(w http.ResponseWriter, r *http.Request, req *Request, reply Reply) error {
	w.Header().Set("x-request-id", fmt.Sprintf("req_fake_%03d", req.Seq))
	if reply.Status >= 400 {
		msg := reply.ErrorMessage
		if msg == "" {
			msg = errorMessage(reply.Status)
		}
		retry := reply.RetryAfter
		if retry == 0 && reply.Status == http.StatusTooManyRequests {
			retry = time.Second
		}
		return writeError(w, reply.Status, msg, retry)
	}
	evs, faultAt := reply.events(req.Seq, req.Model)
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush()
	for i, ev := range evs {
		if i == faultAt {
			return s.fault(w, r, reply.Fault, flush)
		}
		if !s.wait(r.Context(), ev.delay) {
			return nil
		}
		if err := writeEvent(w, ev); err != nil {
			return err
		}
		flush()
	}
	return nil
}

// fault carries out f. Stall and Cut abort the handler, which makes net/http
// drop the connection without ending the body, as a broken network would.
func (s *Server) fault(w http.ResponseWriter, r *http.Request, f Fault, flush func()) error {
	switch f {
	case Stall:
		s.wait(r.Context(), -1)
		panic(http.ErrAbortHandler)
	case Malformed:
		_, err := io.WriteString(w, "event: response.output_text.delta\ndata: {not json\n\n")
		flush()
		return err
	case Cut:
		panic(http.ErrAbortHandler)
	}
	return nil
}

// wait sleeps for d (forever when d < 0) and reports whether it was not
// cut short by the client leaving or the server closing.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if d == 0 {
		return true
	}
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
		return true
	case <-ctx.Done():
	case <-s.done:
	}
	return false
}

func writeError(w http.ResponseWriter, status int, msg string, retryAfter time.Duration) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if retryAfter > 0 {
		h.Set("retry-after", strconv.Itoa(int((retryAfter+time.Second-1)/time.Second)))
	}
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(errorBody(status, msg))
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
