package fakeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
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

// Server is the fake Messages API. It is an http.Handler; Start also runs it
// on a loopback listener.
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
		return nil, fmt.Errorf("fake api listen on %s: %w", addr, err)
	}
	s := New(cfg)
	s.url = "http://" + ln.Addr().String()
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.serr = make(chan error, 1)
	go func() { s.serr <- s.http.Serve(ln) }()
	s.log.Info("fake api listening", "url", s.url)
	return s, nil
}

// URL returns the base URL to put in ANTHROPIC_BASE_URL, e.g.
// "http://127.0.0.1:40123". It is "" for a Server made with New.
func (s *Server) URL() string { return s.url }

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

// Enqueue appends replies that the next main-loop requests (see
// Request.MainLoop) get, one each, before the Responder is asked again.
//
// Each attempt of the CLI is a request: an enqueued error reply answers only
// the first attempt, and the CLI's retries (CLAUDE_CODE_MAX_RETRIES) and its
// non-streaming fallback after a broken stream take the following replies.
// Enqueue the error once per attempt for a turn that must fail.
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

// Requests returns every /v1/messages request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// OtherRequests returns "METHOD /path" for every request to a path other
// than /v1/messages.
func (s *Server) OtherRequests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.others...)
}

// WaitRequests waits until at least n /v1/messages requests arrived and
// returns them all.
func (s *Server) WaitRequests(ctx context.Context, n int) ([]Request, error) {
	reqs, err := s.Wait(ctx, func(reqs []Request) bool { return len(reqs) >= n })
	if err != nil {
		return reqs, fmt.Errorf("wait for %d requests (have %d): %w", n, len(reqs), err)
	}
	return reqs, nil
}

// WaitPrompts waits until a request whose prompt (Request.Prompt) is each
// of prompts has arrived.
func (s *Server) WaitPrompts(ctx context.Context, prompts ...string) error {
	_, err := s.Wait(ctx, func(reqs []Request) bool {
		for _, p := range prompts {
			if !slices.ContainsFunc(reqs, func(r Request) bool { return r.Prompt() == p }) {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("waiting for the model to get %q: %w", prompts, err)
	}
	return nil
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

// ServeHTTP answers POST /v1/messages with a reply and anything else with a
// harmless answer.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 256<<20))
	if err != nil {
		s.log.Warn("read request body", "path", r.URL.Path, "err", err)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		s.serveOther(w, r)
		return
	}
	req, err := ParseRequest(body)
	if err != nil {
		s.log.Warn("bad messages request", "err", err)
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error(), 0, "")
		return
	}
	req.Header = r.Header.Clone()

	s.mu.Lock()
	req.Seq = len(s.requests) + 1
	var reply Reply
	queued := req.MainLoop() && len(s.queue) > 0
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
	s.log.Info("messages request",
		"seq", req.Seq, "model", req.Model, "stream", req.Stream, "tools", len(req.Tools),
		"messages", len(req.Messages), "prompt", clip(req.Prompt(), 60), "queued", queued,
		"status", reply.Status, "fault", reply.Fault.String())

	if err := s.reply(w, r, req, reply); err != nil {
		s.log.Warn("write reply", "seq", req.Seq, "err", err)
	}
}

// serveOther answers the CLI's other calls so that it carries on.
func (s *Server) serveOther(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.others = append(s.others, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	s.log.Info("other request", "method", r.Method, "path", r.URL.Path)
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"input_tokens":12}`)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{}`)
	default:
		writeError(w, http.StatusNotFound, "not_found_error", "fake api: no route "+r.URL.Path, 0, "")
	}
}

func (s *Server) reply(w http.ResponseWriter, r *http.Request, req *Request, reply Reply) error {
	reqID := fmt.Sprintf("req_fake_%03d", req.Seq)
	if reply.Status >= 400 {
		typ, msg := reply.ErrorType, reply.ErrorMessage
		if typ == "" {
			typ = errorType(reply.Status)
		}
		if msg == "" {
			msg = errorMessage(reply.Status)
		}
		retry := reply.RetryAfter
		if retry == 0 && reply.Status == http.StatusTooManyRequests {
			retry = time.Second
		}
		return writeError(w, reply.Status, typ, msg, retry, reqID)
	}
	w.Header().Set("request-id", reqID)
	if !req.Stream {
		return s.replyJSON(w, r, req, reply)
	}
	return s.replySSE(w, r, req, reply)
}

func (s *Server) replyJSON(w http.ResponseWriter, r *http.Request, req *Request, reply Reply) error {
	msg, err := reply.message(req.Seq, req.Model)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "api_error", err.Error(), 0, "")
		return err
	}
	if !s.wait(r.Context(), time.Duration(len(reply.TextDeltas()))*reply.Delay) {
		return nil
	}
	if reply.Fault == Stall || reply.Fault == Cut {
		return s.fault(w, r, reply.Fault, func() {})
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(msg)
}

func (s *Server) replySSE(w http.ResponseWriter, r *http.Request, req *Request, reply Reply) error {
	evs, faultAt, err := reply.events(req.Seq, req.Model)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "api_error", err.Error(), 0, "")
		return err
	}
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
	case ErrorEvent:
		err := writeEvent(w, event{name: "error", data: errorBody("overloaded_error", "Overloaded (fake stream error)")})
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

func writeError(w http.ResponseWriter, status int, typ, msg string, retryAfter time.Duration, reqID string) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if reqID != "" {
		h.Set("request-id", reqID)
	}
	if retryAfter > 0 {
		h.Set("retry-after", strconv.Itoa(int((retryAfter+time.Second-1)/time.Second)))
	}
	if status == 529 || status == http.StatusTooManyRequests || status >= 500 {
		h.Set("x-should-retry", "true")
	}
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(errorBody(typ, msg))
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
