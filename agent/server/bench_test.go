package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
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

// The benchmarks here serve AgentService over real loopback TCP from this
// process, with a session.Manager whose CLI is the fake one
// (internal/fakeclaude). Events come from the real bridge path: prompts
// "FLOOD n" make the fake CLI write n text deltas.

// benchAgent is an in-process agent serving on 127.0.0.1.
type benchAgent struct {
	dir  string
	mgr  *session.Manager
	srv  *grpc.Server
	addr string
}

// startBenchAgent builds the fake CLI into dir, opens a Manager on dir and
// serves it on a loopback TCP port. Stop it with close.
func startBenchAgent(dir string) (*benchAgent, error) {
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(dir, "fakeclaude")
	cmd := exec.Command("go", "build", "-o", bin, "./internal/fakeclaude")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build fakeclaude: %v\n%s", err, out)
	}
	ctx := context.Background()
	mgr, err := session.Open(ctx, session.Config{ClaudeBin: bin, DefaultDir: dir}, filepath.Join(dir, "agent.db"))
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		mgr.Close(ctx)
		return nil, err
	}
	log := slog.New(slog.DiscardHandler)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(UnaryRecover(log)), grpc.ChainStreamInterceptor(StreamRecover(log)))
	pb.RegisterAgentServiceServer(srv, &Agent{Sessions: mgr, Log: log})
	go srv.Serve(lis) //nolint:errcheck // ends with Stop in close
	return &benchAgent{dir: dir, mgr: mgr, srv: srv, addr: lis.Addr().String()}, nil
}

func (a *benchAgent) close() {
	a.srv.Stop()
	a.mgr.Close(context.Background())
}

// runTurn sends prompt to s and waits until the session is idle again.
func runTurn(ctx context.Context, s *session.Session, prompt string) error {
	if err := s.SendUser(ctx, prompt, nil); err != nil {
		return err
	}
	return waitIdle(ctx, s)
}

// waitIdle waits until no turn of s is running and its events are out.
func waitIdle(ctx context.Context, s *session.Session) error {
	return s.Stream(ctx, session.StreamOptions{From: s.LastSeq(), UntilIdle: true}, func(*pb.AgentEvent) error { return nil })
}

// dial opens a client connection to addr.
func dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// replayEvents is the size of the replayed session.
const replayEvents = 100_000

// replayFixture is one agent with one idle session of replayEvents events,
// shared by every run of BenchmarkReplay in this process (building it takes
// a second or two); TestMain stops it.
var replayFixture struct {
	sync.Mutex
	agent *benchAgent
	id    string
	err   error
}

func replaySession() (*benchAgent, string, error) {
	f := &replayFixture
	f.Lock()
	defer f.Unlock()
	if f.agent != nil || f.err != nil {
		return f.agent, f.id, f.err
	}
	f.agent, f.id, f.err = buildReplaySession()
	return f.agent, f.id, f.err
}

func buildReplaySession() (*benchAgent, string, error) {
	dir, err := os.MkdirTemp("", "betcode-replay-bench-")
	if err != nil {
		return nil, "", err
	}
	a, err := startBenchAgent(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	ctx := context.Background()
	s, err := a.mgr.Create(ctx, session.CreateRequest{})
	if err == nil {
		// An empty turn measures the events a turn adds around its deltas,
		// so the flood can make the session exactly replayEvents long.
		err = runTurn(ctx, s, "FLOOD 0")
	}
	if err == nil {
		perTurn := s.LastSeq() - 1
		err = runTurn(ctx, s, fmt.Sprintf("FLOOD %d", replayEvents-s.LastSeq()-perTurn))
	}
	if err == nil && s.LastSeq() != replayEvents {
		err = fmt.Errorf("fixture session has %d events, want %d", s.LastSeq(), replayEvents)
	}
	if err != nil {
		a.close()
		os.RemoveAll(dir)
		return nil, "", err
	}
	return a, s.ID(), nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if a := replayFixture.agent; a != nil {
		a.close()
		os.RemoveAll(a.dir)
	}
	os.Exit(code)
}

// BenchmarkReplay replays a stored 100,000-event session from SQLite to a
// client over gRPC on loopback TCP (ResumeSession from sequence 0, which
// ends once the idle session is fully sent). One op is one full replay; it
// reports events/s received by the client, which runs in this process.
func BenchmarkReplay(b *testing.B) {
	a, id, err := replaySession()
	if err != nil {
		b.Fatal(err)
	}
	conn, err := dial(a.addr)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	api := pb.NewAgentServiceClient(conn)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		st, err := api.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id})
		if err != nil {
			b.Fatal(err)
		}
		var n, last uint64
		for {
			ev, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatalf("replay failed after %d events: %v", n, err)
			}
			if ev.Sequence != last+1 {
				b.Fatalf("event %d has sequence %d, want %d", n, ev.Sequence, last+1)
			}
			last = ev.Sequence
			n++
		}
		if n != replayEvents {
			b.Fatalf("replayed %d events, want %d", n, replayEvents)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*replayEvents)/b.Elapsed().Seconds(), "events/s")
}

// Fan-out benchmark parameters.
const (
	fanoutRate = 10_000 // events/s on the session
	fanoutTick = 10 * time.Millisecond
)

// Environment of the fan-out client process (see TestFanoutClientProcess).
const (
	envFanoutAddr    = "BETCODE_BENCH_FANOUT_ADDR"
	envFanoutSession = "BETCODE_BENCH_FANOUT_SESSION"
	envFanoutWarm    = "BETCODE_BENCH_FANOUT_WARM" // last sequence before the load
	envFanoutClients = "BETCODE_BENCH_FANOUT_CLIENTS"
)

// fanoutResult is what the client process reports on stdout.
type fanoutResult struct {
	Received []uint64 // events received per client
	Errors   []string // per client: why its stream ended early, or ""
	// Latency from emit (the event's timestamp) to receipt, over every
	// client's live events, in microseconds.
	P50, P99, Max float64
	CPUSeconds    float64 // user+sys of the client process while measuring
}

// BenchmarkFanout attaches 100 clients (each its own TCP connection, all in
// a separate client process so their CPU is not charged to the agent) to
// one session, then makes the session produce 10,000 events/s: every 10 ms
// a "FLOOD k" turn whose k deltas plus the turn's own events make 100
// events. One op is one event produced on the session; every client must
// receive all of them, in order, without being cut off as a slow consumer.
//
// It reports the session's achieved event rate, deliveries/s (events x
// clients), the agent's CPU (getrusage RUSAGE_SELF over the paced window;
// the fake CLI and the client process are other processes) as a percentage
// of one core and per delivery, the clients' CPU, and emit-to-client latency.
// Run it with a fixed count, e.g. -benchtime 50000x (5 s of load).
// clients=10 is a control: the same load with a tenth of the deliveries.
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{100, 10} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) { benchFanout(b, n) })
	}
}

func benchFanout(b *testing.B, clients int) {
	a, err := startBenchAgent(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer a.close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := a.mgr.Create(ctx, session.CreateRequest{})
	if err != nil {
		b.Fatal(err)
	}
	// Start the CLI and measure the events a turn adds around its deltas.
	if err := runTurn(ctx, s, "FLOOD 0"); err != nil {
		b.Fatal(err)
	}
	perTurn := int(s.LastSeq() - 1)
	perTick := fanoutRate * int(fanoutTick) / int(time.Second)
	flood := fmt.Sprintf("FLOOD %d", perTick-perTurn)

	cmd := exec.Command(os.Args[0], "-test.run=^TestFanoutClientProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envFanoutAddr+"="+a.addr, envFanoutSession+"="+s.ID(),
		envFanoutWarm+"="+strconv.FormatUint(s.LastSeq(), 10), envFanoutClients+"="+strconv.Itoa(clients))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdoutPipe, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	stdout := bufio.NewReader(stdoutPipe)
	if line, err := readLine(stdout, "ready"); err != nil {
		b.Fatalf("client process: %v (%q)", err, line)
	}

	b.ResetTimer()
	cpu0, start := cpuTime(), time.Now()
	tick := time.NewTicker(fanoutTick)
	for produced := 0; produced < b.N; produced += perTick {
		if err := s.SendUser(ctx, flood, nil); err != nil {
			b.Fatal(err)
		}
		<-tick.C
	}
	tick.Stop()
	if err := waitIdle(ctx, s); err != nil {
		b.Fatal(err)
	}
	final := s.LastSeq()
	produced := final - 1 - uint64(perTurn) // events since the clients attached
	cpu, wall := cpuTime()-cpu0, time.Since(start)
	// Clients may still be receiving; the latency they report shows it.
	fmt.Fprintf(stdin, "%d\n", final)
	line, err := readLine(stdout, "{")
	if err != nil {
		b.Fatalf("client process: %v (%q)", err, line)
	}
	b.StopTimer()
	var res fanoutResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		b.Fatalf("client process result %q: %v", line, err)
	}
	for i, n := range res.Received {
		if n != final || res.Errors[i] != "" {
			b.Fatalf("client %d received %d of %d events: %s", i, n, final, res.Errors[i])
		}
	}
	deliveries := float64(produced) * float64(clients)
	b.ReportMetric(float64(produced)/wall.Seconds(), "events/s")
	b.ReportMetric(deliveries/wall.Seconds(), "deliveries/s")
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "agent-cpu-%")
	b.ReportMetric(float64(cpu.Microseconds())/deliveries, "agent-cpu-µs/delivery")
	b.ReportMetric(100*res.CPUSeconds/wall.Seconds(), "clients-cpu-%")
	b.ReportMetric(res.P50, "emit-to-client-p50-µs")
	b.ReportMetric(res.P99, "emit-to-client-p99-µs")
	b.ReportMetric(res.Max, "emit-to-client-max-µs")
}

// readLine reads stdout lines until one starts with prefix.
func readLine(r *bufio.Reader, prefix string) (string, error) {
	for {
		line, err := r.ReadString('\n')
		if len(line) >= len(prefix) && line[:len(prefix)] == prefix {
			return line, nil
		}
		if err != nil {
			return line, err
		}
	}
}

// cpuTime is this process's user+sys CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestFanoutClientProcess is the client side of BenchmarkFanout, run in a
// child process; without its environment it does nothing. It attaches
// the requested number of Converse streams from sequence 0, prints "ready" once each
// has received the events that existed before it started, reads the
// session's final sequence from stdin, waits until every client has it and
// prints a fanoutResult as JSON.
func TestFanoutClientProcess(t *testing.T) {
	addr, id := os.Getenv(envFanoutAddr), os.Getenv(envFanoutSession)
	if addr == "" {
		return // only meaningful as BenchmarkFanout's child process
	}
	warm, err := strconv.ParseUint(os.Getenv(envFanoutWarm), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(os.Getenv(envFanoutClients))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type client struct {
		received atomic.Uint64
		err      error // set before done.Done
		lat      []time.Duration
		reached  chan struct{} // closed when received hits target, or the client gave up
		once     sync.Once
	}
	var target atomic.Uint64 // the final sequence, once known
	clients := make([]client, n)
	var ready, done sync.WaitGroup
	ready.Add(n)
	done.Add(n)
	for i := range clients {
		c := &clients[i]
		c.reached = make(chan struct{})
		conn, err := dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		st, err := pb.NewAgentServiceClient(conn).Converse(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := &pb.StartConversation{SessionId: id, Metadata: map[string]string{"from_sequence": "0"}}
		if err := st.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: start}}); err != nil {
			t.Fatal(err)
		}
		go func() {
			defer done.Done()
			defer c.once.Do(func() { close(c.reached) })
			isReady := false
			defer func() {
				if !isReady {
					ready.Done()
				}
			}()
			c.lat = make([]time.Duration, 0, 1<<16)
			for {
				ev, err := st.Recv()
				if err != nil {
					c.err = err
					return
				}
				n := c.received.Load()
				if ev.Sequence != n+1 {
					c.err = fmt.Errorf("got sequence %d after %d", ev.Sequence, n)
					return
				}
				c.received.Store(n + 1)
				if t := target.Load(); t != 0 && n+1 >= t {
					c.once.Do(func() { close(c.reached) })
				}
				if ev.Sequence > warm {
					c.lat = append(c.lat, time.Since(ev.Timestamp.AsTime()))
				}
				if !isReady && ev.Sequence >= warm {
					isReady = true
					ready.Done()
				}
			}
		}()
	}
	ready.Wait()
	cpu0 := cpuTime()
	fmt.Println("ready")
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	end, err := strconv.ParseUint(strings.TrimSpace(line), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until every client has everything (or gave up), then hang up.
	target.Store(end)
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
wait:
	for i := range clients {
		if clients[i].received.Load() >= end {
			continue
		}
		select {
		case <-clients[i].reached:
		case <-deadline.C:
			break wait
		}
	}
	res := fanoutResult{CPUSeconds: (cpuTime() - cpu0).Seconds()}
	cancel()
	done.Wait()
	var lat []time.Duration
	for i := range clients {
		c := &clients[i]
		n := c.received.Load()
		res.Received = append(res.Received, n)
		msg := ""
		if n < end && c.err != nil {
			msg = c.err.Error()
		}
		res.Errors = append(res.Errors, msg)
		lat = append(lat, c.lat...)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
		res.P50, res.P99, res.Max = pct(0.5), pct(0.99), pct(1)
	}
	out, _ := json.Marshal(res)
	fmt.Printf("%s\n", out)
}
