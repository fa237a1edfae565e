package fakeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/betcode-dev/betcode/shared/internal/fakecore"
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
// on a loopback listener. Its Core keeps the requests and the reply queue:
//
//   - Enqueue appends replies that the next main-loop requests (see
//     Request.MainLoop) get, one each, before the Responder is asked again.
//     Each attempt of the CLI is a request: an enqueued error reply answers
//     only the first attempt, and the CLI's retries (CLAUDE_CODE_MAX_RETRIES)
//     and its non-streaming fallback after a broken stream take the following
//     replies. Enqueue the error once per attempt for a turn that must fail.
//   - Requests and WaitRequests return the /v1/messages requests;
//     OtherRequests names the calls to other paths.
//   - URL is the base URL to put in ANTHROPIC_BASE_URL, e.g.
//     "http://127.0.0.1:40123" ("" for a Server made with New).
//   - Close ends stalled and delayed replies, stops the listener of Start
//     and waits until the handlers have returned.
type Server struct {
	*fakecore.Core[Request, Reply]
	responder func(*Request) Reply
}

var _ http.Handler = (*Server)(nil)

// New returns a Server that is not listening, for use with httptest or an
// existing mux.
func New(cfg Config) *Server {
	s := &Server{Core: fakecore.New[Request, Reply](cfg.Logger), responder: cfg.Responder}
	if s.responder == nil {
		s.responder = KeywordReply
	}
	return s
}

// Start returns a Server listening on cfg.Addr (default 127.0.0.1:0).
// Close it when done.
func Start(cfg Config) (*Server, error) {
	s := New(cfg)
	if err := s.Listen(cfg.Addr, "fake api", s); err != nil {
		return nil, err
	}
	return s, nil
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

// ServeHTTP answers POST /v1/messages with a reply and anything else with a
// harmless answer.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 256<<20))
	if err != nil {
		s.Log.Warn("read request body", "path", r.URL.Path, "err", err)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		s.serveOther(w, r)
		return
	}
	req, err := ParseRequest(body)
	if err != nil {
		s.Log.Warn("bad messages request", "err", err)
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error(), 0, "")
		return
	}
	req.Header = r.Header.Clone()
	reply, queued := s.Record(func(seq int) Request { req.Seq = seq; return *req }, req.MainLoop())

	if !queued {
		reply = s.responder(req)
	}
	s.Log.Info("messages request",
		"seq", req.Seq, "model", req.Model, "stream", req.Stream, "tools", len(req.Tools),
		"messages", len(req.Messages), "prompt", fakecore.Clip(req.Prompt(), 60), "queued", queued,
		"status", reply.Status, "fault", reply.Fault.String())

	if err := s.reply(w, r, req, reply); err != nil {
		s.Log.Warn("write reply", "seq", req.Seq, "err", err)
	}
}

// serveOther answers the CLI's other calls so that it carries on.
func (s *Server) serveOther(w http.ResponseWriter, r *http.Request) {
	s.RecordOther(r)
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
	if !s.Sleep(r.Context(), time.Duration(len(reply.TextDeltas()))*reply.Delay) {
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
		if !s.Sleep(r.Context(), ev.delay) {
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
		s.Sleep(r.Context(), -1)
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
