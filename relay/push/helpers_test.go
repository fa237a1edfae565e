package push

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/relay/internal/pushtest"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/postgres"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	"github.com/betcode-dev/betcode/relay/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// opener opens a store on one database; each call is another process
// (replica) sharing it.
type opener func(t *testing.T) store.Store

// backends runs f on a fresh SQLite file and a fresh PostgreSQL schema.
func backends(t *testing.T, f func(t *testing.T, open opener)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "relay.db")
		f(t, func(t *testing.T) store.Store { return openSQLite(t, path) })
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		f(t, func(t *testing.T) store.Store {
			s, err := postgres.Open(t.Context(), url, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		})
	})
}

func openSQLite(t *testing.T, path string) store.Store {
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// tbWriter logs to tb and keeps what it logged, for the checks that no
// secret is logged.
type tbWriter struct {
	tb  testing.TB
	mu  *sync.Mutex
	all *strings.Builder
}

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Log(string(p))
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(p)
	return len(p), nil
}

var (
	logsMu sync.Mutex
	logs   = map[testing.TB]*strings.Builder{}
)

func testLog(t testing.TB) *slog.Logger {
	logsMu.Lock()
	b := logs[t]
	if b == nil {
		b = &strings.Builder{}
		logs[t] = b
		t.Cleanup(func() {
			logsMu.Lock()
			delete(logs, t)
			logsMu.Unlock()
		})
	}
	logsMu.Unlock()
	return slog.New(slog.NewTextHandler(tbWriter{t, &logsMu, b}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// noSecretsLogged fails t if anything logged through testLog(t) shows a
// subscription's keys or its endpoint's path.
func noSecretsLogged(t *testing.T, subs ...*pushtest.Subscription) {
	t.Helper()
	logsMu.Lock()
	text := logs[t].String()
	logsMu.Unlock()
	if text == "" {
		t.Error("nothing was logged: the secrets check checks nothing")
	}
	for _, s := range subs {
		path := s.Endpoint[strings.Index(s.Endpoint, "/push/"):]
		for what, secret := range map[string]string{"p256dh": s.P256dh, "auth": s.Auth, "endpoint path": path} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s of subscription %s was logged", what, s.ID)
			}
		}
	}
}

// newAuth returns a running Authenticator over st.
func newAuth(t *testing.T, st store.Store) *auth.Authenticator {
	a := auth.New(st, auth.Options{Log: testLog(t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return a
}

// env is a service with a user alice owning machine m1, and a push
// service.
type env struct {
	st    store.Store
	auth  *auth.Authenticator
	svc   *Service
	push  *pushtest.Server
	done  chan string // kinds whose delivery finished
	token string      // alice's bearer token
}

func newEnv(t *testing.T, open opener) *env {
	t.Helper()
	st := open(t)
	ctx := t.Context()
	for _, u := range []string{"alice", "bob"} {
		if err := st.CreateUser(ctx, store.User{ID: u}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.UpsertMachine(ctx, store.Machine{ID: "m1", OwnerID: "alice", Name: "laptop"}); err != nil {
		t.Fatal(err)
	}
	noServiceGoroutines(t) // checked after every Service of the test closed
	e := &env{st: st, auth: newAuth(t, st), push: pushtest.New(t)}
	e.svc = e.service(t, st, "mailto:ops@example.com")
	e.done = make(chan string, 100)
	e.svc.delivered = func(kind string) { e.done <- kind }
	e.token = storetest.UserToken(t, st, "alice")
	return e
}

// service starts a Service on st, closed at cleanup.
func (e *env) service(t *testing.T, st store.Store, subject string) *Service {
	t.Helper()
	svc, err := New(t.Context(), Options{
		Store: st, Auth: e.auth, Log: testLog(t), Subject: subject,
		WatchRetryMin: time.Millisecond, WatchRetryMax: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

// noServiceGoroutines fails t if, once its later cleanups (which close
// its Services) have run, a goroutine is still running a Service method:
// Close must have waited for every one. A goroutine Close waited for may
// still be returning from its deferred calls, so the check yields to the
// scheduler a while before it decides.
func noServiceGoroutines(t *testing.T) {
	t.Cleanup(func() {
		var leaked []string
		for range 10000 {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			leaked = leaked[:0]
			for g := range strings.SplitSeq(string(buf), "\n\n") {
				if strings.Contains(g, "relay/push.(*Service)") {
					leaked = append(leaked, g)
				}
			}
			if len(leaked) == 0 {
				return
			}
			runtime.Gosched()
		}
		t.Errorf("goroutines of the push service outlived Close:\n%s", strings.Join(leaked, "\n\n"))
	})
}

// subscribe makes a pushtest subscription and stores it for user.
func (e *env) subscribe(t *testing.T, user string, kinds ...string) (*pushtest.Subscription, store.PushSubscription) {
	t.Helper()
	ps := e.push.Subscribe(t)
	sub, err := e.st.AddPushSubscription(t.Context(), store.PushSubscription{UserID: user, Endpoint: ps.Endpoint, P256dh: ps.P256dh, Auth: ps.Auth, Name: "test", Kinds: kinds})
	if err != nil {
		t.Fatal(err)
	}
	return ps, sub
}

// waitDelivered waits for n deliveries to finish.
func (e *env) waitDelivered(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-e.done:
		case <-time.After(30 * time.Second):
			t.Fatal("a notification's delivery did not finish within 30s")
		}
	}
}

func sends(s *Service, kind, outcome string) float64 {
	return testutil.ToFloat64(s.metrics.sends.WithLabelValues(kind, outcome))
}
