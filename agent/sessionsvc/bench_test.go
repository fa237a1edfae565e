package sessionsvc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

var idleWindow = flag.Duration("idle-window", 10*time.Second, "BenchmarkWatchAllIdle: length of the idle window measured")

// BenchmarkWatchAllIdle measures what 100 sessions watched by 10
// WatchAllSessions streams cost when nothing happens: it creates 100
// sessions through SessionService (each starts its provider, the fake CLI;
// the manager keeps its default 8 processes and stops the least recently
// used; procs=100 keeps all 100 running), opens 10 WatchAllSessions streams over real gRPC on loopback TCP,
// waits until each has received the current status of every active
// session, then reads this process's CPU time (getrusage user+sys: the
// service, the manager, the gRPC server and the 10 clients) over an idle
// window (-idle-window, 10s) and reports it as percent of one core. After
// the window it stops one session and checks that every watcher sees it,
// so that the streams were alive all along.
func BenchmarkWatchAllIdle(b *testing.B) {
	for _, procs := range []int{8, 100} {
		b.Run(fmt.Sprintf("procs=%d", procs), func(b *testing.B) { benchWatchAllIdle(b, procs) })
	}
}

func benchWatchAllIdle(b *testing.B, procs int) {
	const sessions, watchers = 100, 10
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := newBenchEnv(b, procs)

	dir := filepath.Join(b.TempDir(), "proj")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 0, sessions)
	for range sessions {
		resp, err := e.api.CreateSession(ctx, &pb.CreateSessionRequest{WorkingDirectory: dir, Provider: pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE})
		if err != nil {
			b.Fatalf("CreateSession %d: %v", len(ids), err)
		}
		ids = append(ids, resp.GetSession().GetId())
	}

	var events atomic.Int64 // received by all watchers after their snapshot
	stopped := make(chan string, watchers)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	ready := make(chan error, watchers)
	for range watchers {
		st, err := e.api.WatchAllSessions(ctx, &pb.WatchAllSessionsRequest{})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			seen := 0
			for {
				ev, err := st.Recv()
				if err != nil {
					if seen < sessions {
						ready <- fmt.Errorf("watch ended after %d of %d current statuses: %w", seen, sessions, err)
					}
					return
				}
				if seen < sessions {
					if seen++; seen == sessions {
						ready <- nil
					}
					continue
				}
				events.Add(1)
				if ev.GetNewStatus() == pb.SessionStatus_SESSION_STATUS_STOPPED {
					stopped <- ev.GetSessionId()
				}
			}
		})
	}
	for range watchers {
		if err := <-ready; err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()

	b.ResetTimer()
	var cpu time.Duration
	for range b.N {
		before := rusage(b)
		// The idle window: measuring it is the point of the benchmark.
		time.Sleep(*idleWindow)
		cpu += rusage(b) - before
	}
	b.StopTimer()
	idle := events.Load()
	b.ReportMetric(100*cpu.Seconds()/(float64(b.N)*idleWindow.Seconds()), "%core-idle")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/window")
	b.ReportMetric(float64(idle), "events-in-window")

	if _, err := e.api.StopSession(ctx, &pb.StopSessionRequest{SessionId: ids[0]}); err != nil {
		b.Fatal(err)
	}
	for range watchers {
		select {
		case id := <-stopped:
			if id != ids[0] {
				b.Fatalf("a watcher saw %s stop, want %s", id, ids[0])
			}
		case <-time.After(30 * time.Second):
			b.Fatal("not every watcher saw the stop: a watch stream died while idle")
		}
	}
}

// rusage is this process's user+system CPU time so far.
func rusage(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchEnv is a Service over a Manager running the fake CLI, served over
// gRPC on loopback TCP.
type benchEnv struct {
	api pb.SessionServiceClient
}

func newBenchEnv(b *testing.B, procs int) *benchEnv {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "fakeclaude")
	build := exec.Command("go", "build", "-o", bin, "./internal/fakeclaude")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build fakeclaude: %v\n%s", err, out)
	}
	m, err := session.Open(context.Background(), session.Config{ClaudeBin: bin, DefaultDir: b.TempDir(), StopGrace: 2 * time.Second, MaxProcesses: procs},
		filepath.Join(b.TempDir(), "agent.db"))
	if err != nil {
		b.Fatal(err)
	}
	svc, err := New(context.Background(), m, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterSessionServiceServer(srv, svc)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		conn.Close()
		srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			b.Errorf("serve: %v", err)
		}
		_ = m.Close(context.Background())
		svc.Close()
	})
	return &benchEnv{api: pb.NewSessionServiceClient(conn)}
}
