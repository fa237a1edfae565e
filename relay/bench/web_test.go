package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// deployRelayEnv is the relay's environment in deploy/: Dockerfile.relay
// sets GODEBUG, the Helm chart GOGC.
var deployRelayEnv = []string{"GODEBUG=adaptivestackstart=0", "GOGC=40"}

// webAgent is the agent side the web benchmark needs: one machine with a
// few sessions, whose session list (WatchSessions) and session streams
// (ResumeSession with follow) stay open and quiet, as a browser watching an
// idle session sees them.
type webAgent struct {
	pb.UnimplementedAgentServiceServer
	pb.UnimplementedConfigServiceServer
	sessions []*pb.SessionSummary
}

func newWebAgent(n int) *webAgent {
	a := &webAgent{}
	for i := range n {
		a.sessions = append(a.sessions, &pb.SessionSummary{Id: fmt.Sprintf("s-%03d", i), Model: "claude-sonnet", WorkingDirectory: "/work/p",
			MessageCount: 12, LastMessagePreview: "Done: the tests pass."})
	}
	return a
}

func (a *webAgent) ListSessions(_ context.Context, req *pb.ListSessionsRequest) (*pb.ListSessionsResponse, error) {
	return &pb.ListSessionsResponse{Sessions: a.sessions, Total: uint32(len(a.sessions))}, nil
}

func (a *webAgent) WatchSessions(_ *pb.WatchSessionsRequest, s grpc.ServerStreamingServer[pb.SessionUpdate]) error {
	if err := s.Send(&pb.SessionUpdate{SnapshotDone: true}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// ResumeSession answers as the agent does: a start past the last sequence
// (0 here) is OUT_OF_RANGE naming it; a follow stays open.
func (a *webAgent) ResumeSession(req *pb.ResumeSessionRequest, s grpc.ServerStreamingServer[pb.AgentEvent]) error {
	if req.FromSequence == math.MaxUint64 {
		return status.Error(codes.OutOfRange, "from_sequence is past the last sequence 0")
	}
	// As the agent's replay would, the stream starts at once: headers
	// reach the relay, which then copies the (quiet) response body.
	if err := s.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func (a *webAgent) GetSettings(context.Context, *pb.GetSettingsRequest) (*pb.Settings, error) {
	return &pb.Settings{}, nil
}

func (a *webAgent) GetPermissions(context.Context, *pb.GetPermissionsRequest) (*pb.PermissionRules, error) {
	return &pb.PermissionRules{}, nil
}

// webBrowsers opens WebSockets to the relay's public port, each saying hello
// and subscribing to one session, and reports when each saw its replay_done
// (the session stream is open end to end) and the pong to one application
// ping (the web app sends one every 25 s).
type webBrowsers struct {
	r     *relayProc
	tls   *tls.Config
	mu    sync.Mutex
	conns []*websocket.Conn
}

func newWebBrowsers(tb testing.TB, r *relayProc) *webBrowsers {
	pem, err := os.ReadFile(r.caFile())
	if err != nil {
		tb.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	return &webBrowsers{r: r, tls: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}}
}

func (w *webBrowsers) open(ctx context.Context, machine, session string) error {
	tr := &http.Transport{TLSClientConfig: w.tls.Clone(), TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	c, _, err := websocket.Dial(ctx, "wss://"+w.r.addr+"/api/ws", &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: tr}, HTTPHeader: http.Header{"Origin": {"https://" + w.r.addr}},
	})
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.conns = append(w.conns, c)
	w.mu.Unlock()
	hello, _ := json.Marshal(map[string]any{"type": "hello", "token": w.r.token, "machine": machine,
		"subscriptions": []map[string]any{{"sessionId": session, "afterSequence": 0}}})
	if err := c.Write(ctx, websocket.MessageText, hello); err != nil {
		return err
	}
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return err
		}
		var m struct{ Type, Code, Message string }
		json.Unmarshal(data, &m)
		switch m.Type {
		case "replay_done":
			// As the web app does every 25 s, an application ping (the
			// relay handles one message): then idle.
			if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"ping"}`)); err != nil {
				return err
			}
		case "pong":
			// Keep reading (and so answering pings) until closed.
			go func() {
				for {
					if _, _, err := c.Read(context.Background()); err != nil {
						return
					}
				}
			}()
			return nil
		case "error", "subscription_ended":
			return fmt.Errorf("%s %s: %s", m.Type, m.Code, m.Message)
		}
	}
}

func (w *webBrowsers) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.conns {
		c.CloseNow()
	}
}

// BenchmarkWebSockets measures the relay holding BETCODE_BENCH_SOCKETS
// (default 1,000) open WebSockets, each subscribed to a session of one
// machine: the relay process's RSS per socket (VmRSS before and after), and
// the latency of REST GET /api/sessions through the relay while they are
// open. Each case does its work once, whatever b.N:
//
//	go test -run '^$' -bench WebSockets -benchtime 1x ./bench/
func BenchmarkWebSockets(b *testing.B) {
	n := envInt("BETCODE_BENCH_SOCKETS", 1000)
	raiseFileLimit(b, uint64(2*n+256))
	if r := envInt("BETCODE_BENCH_MEMPROFILERATE", 0); r > 0 && os.Getenv("BETCODE_BENCH_INPROC") == "1" {
		defer func(old int) { runtime.MemProfileRate = old }(runtime.MemProfileRate)
		runtime.MemProfileRate = r
	}
	// The relay runs with the deploy/ settings (Dockerfile.relay's GODEBUG,
	// relay.yaml's GOGC) unless BETCODE_BENCH_RELAY_ENV says otherwise
	// ("GOGC=100" for Go's defaults).
	env := deployRelayEnv
	if e, ok := os.LookupEnv("BETCODE_BENCH_RELAY_ENV"); ok {
		env = strings.Fields(e)
	}
	r := newRelay(b, env...)
	mint := newCertMint(b, r.pki)
	// The sockets watch BETCODE_BENCH_WEB_MACHINES machines (default 10):
	// each socket holds two calls on its machine's tunnel, and one
	// machine takes at most --max-streams-per-tunnel (512 by default).
	machines := envInt("BETCODE_BENCH_WEB_MACHINES", 10)
	cfgs := mint.machines(b, "web", machines)
	srv := grpc.NewServer()
	// The sockets subscribe to BETCODE_BENCH_WEB_SESSIONS sessions (default
	// 20) round robin: 20 over 10 machines makes 20 distinct streams that
	// the sockets of one caller share; 1000 gives every socket a session
	// (and so an upstream stream) of its own.
	agent := newWebAgent(envInt("BETCODE_BENCH_WEB_SESSIONS", 20))
	pb.RegisterAgentServiceServer(srv, agent)
	pb.RegisterConfigServiceServer(srv, agent)
	for _, cfg := range cfgs {
		link, err := dialAgent(context.Background(), r.addr, cfg, srv)
		if err != nil {
			b.Fatal(err)
		}
		defer link.close()
	}
	machine := "web-00000"
	br := newWebBrowsers(b, r)
	defer br.close()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: br.tls.Clone(), ForceAttemptHTTP2: true}}
	get := func() time.Duration {
		req, _ := http.NewRequest("GET", "https://"+r.addr+"/api/sessions", nil)
		req.Header.Set("Authorization", "Bearer "+r.token)
		req.Header.Set("X-Betcode-Machine", machine)
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("GET /api/sessions: %d", resp.StatusCode)
		}
		return time.Since(start)
	}
	latencies := func(k int) []time.Duration {
		d := make([]time.Duration, k)
		for i := range d {
			d[i] = get()
		}
		slices.Sort(d)
		return d
	}
	// Warm: one socket opened and closed, connections and caches made.
	for range 50 {
		get()
	}
	warm := newWebBrowsers(b, r)
	if err := warm.open(context.Background(), machine, "s-000"); err != nil {
		b.Fatal(err)
	}
	warm.close()
	idle := latencies(envInt("BETCODE_BENCH_CALLS", 1000))
	settle := time.Duration(envInt("BETCODE_BENCH_SETTLE_S", 5)) * time.Second
	time.Sleep(settle) // let the relay's heap settle before reading RSS (a measurement, not a sync)
	inproc := os.Getenv("BETCODE_BENCH_INPROC") == "1"
	snapshot := func() relaySnapshot {
		if inproc { // relay and browsers share this process: RSS is theirs together
			runtime.GC()
			return selfSnapshot(b)
		}
		return r.snapshot(b)
	}
	before := snapshot()

	b.ResetTimer()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs <- br.open(ctx, fmt.Sprintf("web-%05d", i%machines), agent.sessions[i%len(agent.sessions)].Id)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatalf("open a WebSocket: %v\n%s", err, r.log())
		}
	}
	took := time.Since(start)
	busy := latencies(envInt("BETCODE_BENCH_CALLS", 1000))
	time.Sleep(settle)
	after := snapshot()
	b.StopTimer()
	if inproc {
		f, err := os.Create("/tmp/web-heap.prof")
		if err != nil {
			b.Fatal(err)
		}
		pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
		b.Log("heap profile (relay and browsers): /tmp/web-heap.prof")
	}

	b.Logf("relay environment: %q", env)
	b.ReportMetric(float64(after.rssKiB-before.rssKiB)/float64(n), "rss-KiB/socket")
	b.ReportMetric((after.heapInuse-before.heapInuse)/1024/float64(n), "heap-KiB/socket")
	b.ReportMetric((after.stackInuse-before.stackInuse)/1024/float64(n), "stack-KiB/socket")
	b.ReportMetric((after.goroutines-before.goroutines)/float64(n), "goroutines/socket")
	b.ReportMetric(us(percentile(idle, 0.5)), "sessions-p50-µs")
	b.ReportMetric(us(percentile(busy, 0.5)), "sessions-p50-µs-with-sockets")
	b.ReportMetric(us(percentile(busy, 0.99)), "sessions-p99-µs-with-sockets")
	b.Logf("%d sockets subscribed in %s; relay RSS %d → %d KiB (%.1f KiB/socket); heap in use %.1f → %.1f MiB; stacks %.1f → %.1f MiB; goroutines %.0f → %.0f",
		n, took.Round(time.Millisecond), before.rssKiB, after.rssKiB, float64(after.rssKiB-before.rssKiB)/float64(n),
		before.heapInuse/(1<<20), after.heapInuse/(1<<20), before.stackInuse/(1<<20), after.stackInuse/(1<<20), before.goroutines, after.goroutines)
	b.Logf("GET /api/sessions (%d sessions): p50 %.0f µs, p99 %.0f µs idle; p50 %.0f µs, p99 %.0f µs with the sockets open",
		len(agent.sessions), us(percentile(idle, 0.5)), us(percentile(idle, 0.99)), us(percentile(busy, 0.5)), us(percentile(busy, 0.99)))
}
