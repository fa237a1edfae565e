package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/betcode-dev/betcode/relay/auth"
)

// seenCall is what the client handler saw of a call on the in-memory path.
type seenCall struct {
	remote string
	header http.Header
	user   string
}

// fakeAuthenticate accepts "Bearer good" as alice, and anything else as
// nobody (as an open method would be).
func fakeAuthenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer good" {
			r = r.WithContext(auth.WithIdentity(r.Context(), auth.Identity{UserID: "alice", Remote: r.RemoteAddr}))
		}
		next.ServeHTTP(w, r)
	})
}

func TestGatewayPath(t *testing.T) {
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	var mu sync.Mutex
	var seen []seenCall
	route := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, seenCall{remote: r.RemoteAddr, header: r.Header.Clone(), user: auth.UserID(r.Context())})
		mu.Unlock()
		gs.ServeHTTP(w, r)
	})
	reg := &guards{}
	p, err := newGatewayPath(gatewayHandler(reg, fakeAuthenticate, route), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)

	tests := []struct {
		name       string
		token      string
		wantUser   string
		wantAuthed bool
	}{
		{"authenticated call marks the browser's connection", "good", "alice", true},
		{"unauthenticated call does not", "bad", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			cg := reg.newGuard(&fakeConn{}, time.Hour)
			defer cg.begin()()
			ctx := withWebClient(context.Background(), webClient{remote: "203.0.113.7:5555", connID: cg.id})
			// Whatever the gateway's metadata holds, the relay-only and
			// in-memory headers are the relay's own.
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tt.token,
				"x-betcode-user", "mallory", "x-betcode-forwarded-by", "10.0.0.9:8443",
				webRemoteHeader, "198.51.100.1:1", webConnHeader, "999999")
			if _, err := healthpb.NewHealthClient(p.conn()).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 1 {
				t.Fatalf("route saw %d calls; want 1", len(seen))
			}
			s := seen[0]
			if s.remote != "203.0.113.7:5555" {
				t.Errorf("remote = %q; want the browser's 203.0.113.7:5555", s.remote)
			}
			if s.user != tt.wantUser {
				t.Errorf("user = %q; want %q", s.user, tt.wantUser)
			}
			for _, h := range []string{auth.UserHeader, auth.ForwardedByHeader, webRemoteHeader, webConnHeader} {
				if v := s.header.Values(h); len(v) > 0 {
					t.Errorf("route got %s: %q; want none", h, v)
				}
			}
			cg.mu.Lock()
			authed := cg.authed
			cg.mu.Unlock()
			if authed != tt.wantAuthed {
				t.Errorf("browser connection authenticated = %v; want %v", authed, tt.wantAuthed)
			}
		})
	}
}

// A call without a browser (no webClient in its context) names the
// gateway, not the in-memory pipe.
func TestGatewayPathWithoutBrowser(t *testing.T) {
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	remote := make(chan string, 1)
	route := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		remote <- r.RemoteAddr
		gs.ServeHTTP(w, r)
	})
	p, err := newGatewayPath(gatewayHandler(&guards{}, fakeAuthenticate, route), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	if _, err := healthpb.NewHealthClient(p.conn()).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := <-remote; got != "web-gateway" {
		t.Fatalf("remote = %q; want web-gateway", got)
	}
}

func TestSplitWeb(t *testing.T) {
	tests := []struct {
		name, contentType, want string
	}{
		{"gRPC", "application/grpc", "grpc"},
		{"gRPC with a codec", "application/grpc+proto", "grpc"},
		{"JSON", "application/json", "web"},
		{"no content type (a page)", "", "web"},
	}
	h := splitWeb(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "grpc") }),
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "web") }))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := http.NewRequest("POST", "/x", nil)
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if got := w.Body.String(); got != tt.want {
				t.Fatalf("went to %q; want %q", got, tt.want)
			}
		})
	}
}
