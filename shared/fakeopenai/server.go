package fakeopenai

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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

// Server is the fake Responses API. It is an http.Handler; Start also runs
// it on a loopback listener. Its Core keeps the requests and the reply
// queue:
//
//   - Enqueue appends replies that the next requests get, one each, before
//     the Responder is asked again. Each attempt of Codex is a request: with
//     retries enabled, enqueue an error once per attempt for a turn that
//     must fail.
//   - Requests and WaitRequests return the /v1/responses requests;
//     OtherRequests names the calls to other paths (Codex makes none with a
//     custom provider).
//   - URL is the server's root URL, e.g. "http://127.0.0.1:40123" ("" for a
//     Server made with New); BaseURL is a model provider's base_url.
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
	if err := s.Listen(cfg.Addr, "fake openai", s); err != nil {
		return nil, err
	}
	return s, nil
}

// BaseURL returns URL()+"/v1", the base_url of a Codex model provider.
func (s *Server) BaseURL() string { return s.URL() + "/v1" }

// ServeHTTP answers POST /v1/responses with a reply and anything else with
// 404.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 256<<20))
	if err != nil {
		s.Log.Warn("read request body", "path", r.URL.Path, "err", err)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		s.RecordOther(r)
		writeError(w, http.StatusNotFound, "fake openai: no route "+r.Method+" "+r.URL.Path, 0)
		return
	}
	req, err := ParseRequest(body)
	if err != nil {
		s.Log.Warn("bad responses request", "err", err)
		writeError(w, http.StatusBadRequest, err.Error(), 0)
		return
	}
	req.Header = r.Header.Clone()
	reply, queued := s.Record(func(seq int) Request { req.Seq = seq; return *req }, true)

	if !queued {
		reply = s.responder(req)
	}
	s.Log.Info("responses request",
		"seq", req.Seq, "model", req.Model, "tools", len(req.Tools), "input", len(req.Input),
		"prompt", fakecore.Clip(req.Prompt(), 60), "queued", queued, "status", reply.Status, "fault", reply.Fault.String())

	if err := s.reply(w, r, req, reply); err != nil {
		s.Log.Warn("write reply", "seq", req.Seq, "err", err)
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
	case Malformed:
		_, err := io.WriteString(w, "event: response.output_text.delta\ndata: {not json\n\n")
		flush()
		return err
	case Cut:
		panic(http.ErrAbortHandler)
	}
	return nil
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
