package session_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/betcode-dev/betcode/agent/codex"
	"github.com/betcode-dev/betcode/agent/provider"
	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// BenchmarkCodexPathGRPC is BenchmarkCodexPath (codex_bench_test.go, whose
// init makes this test binary the fake app-server) with the client at the
// far end of AgentService.ResumeSession (following) over gRPC on a Unix
// socket, as betcode and the relay link reach the agent: the line-to-client
// time then includes the gRPC hop to another goroutine's Recv.
func BenchmarkCodexPathGRPC(b *testing.B) {
	for _, log := range []string{"disk", "tmpfs"} {
		b.Run("log="+log+"/rate=1000", func(b *testing.B) { benchCodexGRPC(b, log == "tmpfs", 1000) })
	}
}

func benchCodexGRPC(b *testing.B, tmpfs bool, rate int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	logDir := b.TempDir()
	if tmpfs {
		if logDir, err = os.MkdirTemp("/dev/shm", "betcode-bench-"); err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(logDir)
	}
	m, err := session.Open(ctx, session.Config{
		ClaudeBin: "claude-unused", DefaultDir: b.TempDir(),
		Providers: provider.NewRegistry(&codex.Provider{Binary: self, Home: b.TempDir(), BaseURL: "http://127.0.0.1:9/v1"}),
	}, filepath.Join(logDir, "agent.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(context.Background())
	// The fake app-server's switch (envFakeCodex in codex_bench_test.go).
	s, err := m.Create(ctx, session.CreateRequest{
		Provider: pb.SessionProvider_SESSION_PROVIDER_CODEX, Env: map[string]string{"BETCODE_BENCH_FAKE_CODEX": "1"},
	})
	if err != nil {
		b.Fatal(err)
	}

	sockDir, err := os.MkdirTemp("", "cb")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	ln, err := net.Listen("unix", filepath.Join(sockDir, "s.sock"))
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterAgentServiceServer(srv, &server.Agent{Sessions: m})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		srv.Stop()
		<-served
	}()
	conn, err := grpc.NewClient("unix://"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	api := pb.NewAgentServiceClient(conn)

	if _, err := grpcTurn(ctx, api, s, 100, rate); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	lat, err := grpcTurn(ctx, api, s, b.N, rate)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if len(lat) < b.N {
		b.Fatalf("client received %d deltas, want %d", len(lat), b.N)
	}
	b.ReportMetric(float64(len(lat))/b.Elapsed().Seconds(), "events/s")
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(pct(0.50), "line-to-client-p50-µs")
	b.ReportMetric(pct(0.99), "line-to-client-p99-µs")
	b.ReportMetric(pct(1), "line-to-client-max-µs")
}

// grpcTurn follows the session over gRPC from its last event, asks the
// fake app-server for n deltas at rate per second and returns, per delta,
// the time from its write to its receipt by the gRPC client.
func grpcTurn(ctx context.Context, api pb.AgentServiceClient, s *session.Session, n, rate int) ([]time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// From the event before the last: receiving that one replayed shows
	// the server streams the session, so no delta is replayed late.
	from := s.LastSeq()
	if from > 0 {
		from--
	}
	st, err := api.ResumeSession(metadata.AppendToOutgoingContext(ctx, server.MDFollow, "true"),
		&pb.ResumeSessionRequest{SessionId: s.ID(), FromSequence: from})
	if err != nil {
		return nil, err
	}
	if from < s.LastSeq() {
		if _, err := st.Recv(); err != nil {
			return nil, err
		}
	}
	type result struct {
		lat []time.Duration
		err error
	}
	done := make(chan result, 1)
	go func() {
		lat := make([]time.Duration, 0, n)
		var err error
		for {
			var ev *pb.AgentEvent
			if ev, err = st.Recv(); err != nil {
				break
			}
			now := time.Now()
			if d := ev.GetTextDelta(); d != nil && !d.IsComplete {
				ns, perr := strconv.ParseInt(strings.TrimSpace(d.Text), 10, 64)
				if perr != nil {
					err = fmt.Errorf("delta %q carries no time: %w", d.Text, perr)
					break
				}
				lat = append(lat, now.Sub(time.Unix(0, ns)))
			}
			if ev.GetTurnComplete() != nil {
				done <- result{lat: lat}
				return
			}
		}
		done <- result{lat: lat, err: err}
	}()
	if err := s.SendUser(ctx, fmt.Sprintf("BENCH %d %d", n, rate), nil); err != nil {
		return nil, err
	}
	r := <-done
	if r.err != nil {
		return r.lat, fmt.Errorf("stream ended after %d deltas: %w", len(r.lat), r.err)
	}
	if len(r.lat) == 0 {
		return nil, errors.New("no delta received")
	}
	return r.lat, nil
}
