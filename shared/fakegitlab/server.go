package fakegitlab

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config configures a Server.
type Config struct {
	// Token, when set, is the only credential accepted; requests without it
	// get 401. Empty: every request is served.
	Token string
	// Projects are the projects served.
	Projects []*Project
}

// Request is one request the server received.
type Request struct {
	Method string
	Path   string // unescaped, e.g. /api/v4/projects/group/repo/pipelines
	Query  url.Values
	// Token is the credential sent (PRIVATE-TOKEN or bearer), "" if none.
	Token string
	// Status is the HTTP status answered.
	Status int
}

// Failure is a scripted answer; see Server.FailNext.
type Failure struct {
	Status int
	// RetryAfter, if set, is sent as the Retry-After header (seconds or an
	// HTTP date).
	RetryAfter string
	// Body, if set, replaces the default body ({"message": "<status>"}; for
	// 429 GitLab's "Retry later").
	Body string
}

// Server is a running fake GitLab.
type Server struct {
	cfg  Config
	ln   net.Listener
	http *http.Server
	done chan struct{}

	mu       sync.Mutex
	fail     []Failure
	requests []Request
}

// Start serves cfg on a loopback port until Close.
func Start(cfg Config) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakegitlab: listen: %w", err)
	}
	s := &Server{cfg: cfg, ln: ln, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v4/projects/{id}/merge_requests", s.listMergeRequests)
	mux.HandleFunc("GET /api/v4/projects/{id}/merge_requests/{iid}", s.getMergeRequest)
	mux.HandleFunc("GET /api/v4/projects/{id}/pipelines", s.listPipelines)
	mux.HandleFunc("GET /api/v4/projects/{id}/pipelines/{pid}/jobs", s.listJobs)
	mux.HandleFunc("GET /api/v4/projects/{id}/jobs/{jid}", s.getJob)
	mux.HandleFunc("GET /api/v4/projects/{id}/jobs/{jid}/trace", s.getTrace)
	mux.HandleFunc("GET /api/v4/projects/{id}/issues", s.listIssues)
	s.http = &http.Server{Handler: s.middleware(mux), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.http.Serve(ln)
	}()
	return s, nil
}

// URL is the server's base URL (without /api/v4), e.g. http://127.0.0.1:4321.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server.
func (s *Server) Close() error {
	err := s.http.Close()
	<-s.done
	return err
}

// FailNext makes the next len(f) requests get f's answers, in order, instead
// of being served (before the token is checked, as GitLab's rate limiter
// answers before authentication).
func (s *Server) FailNext(f ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = append(s.fail, f...)
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// SetJob replaces the status and log of job id (in any project), e.g. to let
// a running job's log grow; it reports whether the job exists.
func (s *Server) SetJob(id int64, status, trace string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.cfg.Projects {
		for i := range p.Jobs {
			if p.Jobs[i].ID == id {
				p.Jobs[i].Status, p.Jobs[i].Trace = status, trace
				return true
			}
		}
	}
	return false
}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.Header.Get("PRIVATE-TOKEN")
		if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && tok == "" {
			tok = b
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			s.mu.Lock()
			s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Token: tok, Status: sw.status})
			s.mu.Unlock()
		}()
		s.mu.Lock()
		var f *Failure
		if len(s.fail) > 0 {
			f = &s.fail[0]
			s.fail = s.fail[1:]
		}
		s.mu.Unlock()
		switch {
		case f != nil:
			writeFailure(sw, *f)
		case s.cfg.Token != "" && tok != s.cfg.Token:
			writeJSON(sw, http.StatusUnauthorized, map[string]string{"message": "401 Unauthorized"})
		default:
			// The handlers read the projects, which SetJob changes.
			s.mu.Lock()
			defer s.mu.Unlock()
			next.ServeHTTP(sw, r)
		}
	})
}

func writeFailure(w http.ResponseWriter, f Failure) {
	body := f.Body
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	if f.Status == http.StatusTooManyRequests {
		w.Header().Set("RateLimit-Name", "throttle_authenticated_api")
		if body == "" {
			body = "Retry later\n"
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(f.Status)
		fmt.Fprint(w, body)
		return
	}
	if body == "" {
		b, _ := json.Marshal(map[string]string{"message": fmt.Sprintf("%d %s", f.Status, http.StatusText(f.Status))})
		body = string(b)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Status)
	fmt.Fprint(w, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func notFound(w http.ResponseWriter, what string) {
	writeJSON(w, http.StatusNotFound, map[string]string{"message": "404 " + what + " Not Found"})
}

// project finds the request's project; s.mu is held.
func (s *Server) project(w http.ResponseWriter, r *http.Request) *Project {
	id := r.PathValue("id")
	for _, p := range s.cfg.Projects {
		if id == p.PathWithNamespace || id == strconv.FormatInt(p.ID, 10) {
			return p
		}
	}
	notFound(w, "Project")
	return nil
}

// pathInt is the integer path value name, or 0.
func pathInt(r *http.Request, name string) int64 {
	n, _ := strconv.ParseInt(r.PathValue(name), 10, 64)
	return n
}
