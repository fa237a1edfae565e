package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// TestDrainAndKillReplicasLoseNoEvent runs three relay replicas on one
// PostgreSQL database behind a TCP balancer (as a Kubernetes Service is).
// Two clients hold Converse streams of slow turns on two machines, and a
// third machine is offline with buffered messages; then replica A gets
// SIGTERM (it drains) and replica B SIGKILL. Every client ends with every
// event of its turn exactly once, each buffered message reaches the model
// once, and A exits 0 within its grace. It runs on both HTTP/2 fronts.
func TestDrainAndKillReplicasLoseNoEvent(t *testing.T) {
	for _, front := range []string{server.FrontNetHTTP, server.FrontEngine} {
		t.Run(strings.ReplaceAll(front, "/", "-"), func(t *testing.T) { testDrainAndKillReplicas(t, front) })
	}
}

func testDrainAndKillReplicas(t *testing.T, front string) {
	const grace = 20 * time.Second
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), dbURL: pgURL(t), advertise: true, front: front,
		extraArgs: []string{"--drain-grace", grace.String()}})
	bAddr, relayB := w.startReplica("relay B")
	cAddr, _ := w.startReplica("relay C")
	lb := newBalancer(t, w.addr) // the agents connect to A first
	m1 := w.startAgent("m1", lb.addr())
	m2 := w.startAgent("m2", lb.addr())
	m3 := w.startAgent("m3", lb.addr())
	lb.set(w.addr, bAddr, cAddr)
	ctx := ctxT(t, 240*time.Second)

	// m3 has a session, then goes offline; messages for it are buffered.
	api3 := pb.NewAgentServiceClient(w.clientTo(lb.addr()))
	ctx3 := onMachine(ctx, "m3")
	s, err := api3.Converse(ctx3)
	if err != nil {
		t.Fatal(err)
	}
	s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: m3.project}}})
	s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "first"}}})
	session3 := sessionOf(t, recvUntil(t, s, isTurnComplete))
	s.CloseSend()
	m3.proc.kill()
	waitLog(t, w.relay, `machine offline" machine_id=m3`, 30*time.Second)
	queue := func(i int) {
		t.Helper()
		// A client retries a refused call at once; the idempotency key
		// makes a repeat harmless.
		for {
			r, err := api3.QueueMessage(ctx3, &pb.QueueMessageRequest{SessionId: session3, IdempotencyKey: "k" + strconv.Itoa(i),
				Message: &pb.UserMessage{Content: "queued number " + strconv.Itoa(i)}})
			if err == nil {
				if r.Duplicate {
					t.Logf("queued number %d: a retry found it buffered already", i)
				}
				return
			}
			if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
				t.Fatalf("queue %d: %v %s", i, err, errDetails(err))
			}
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}
	for i := 1; i <= 3; i++ {
		queue(i)
	}

	// Two clients, each on its own connection through the balancer, in
	// slow turns (50 deltas, 10 s) on m1 and m2, both machines on A.
	type result struct {
		evs     []*pb.AgentEvent
		drained int
		err     error
	}
	results := make([]result, 2)
	started := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, m := range []*agent{m1, m2} {
		cc := w.clientTo(lb.addr())
		wg.Go(func() {
			r := &results[i]
			r.evs, r.drained, r.err = converseResuming(onMachine(ctx, m.id), cc, m.project, "SLOW story "+m.id, started)
		})
	}
	for range 2 {
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("the turns did not start")
		}
	}
	m3.restart(w) // its buffered messages are delivered wherever it lands

	// Drain A: it exits 0 within the grace; its agents reconnect elsewhere.
	drainStart := time.Now()
	if err := w.relay.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	queue(4) // during the drain
	select {
	case <-w.relay.exited:
	case <-time.After(grace + 5*time.Second):
		t.Fatalf("relay A did not exit within its grace of %s", grace)
	}
	took := time.Since(drainStart)
	if code := w.relay.cmd.ProcessState.ExitCode(); code != 0 || took > grace {
		t.Fatalf("relay A exited %d after %s; want 0 within %s", code, took, grace)
	}
	t.Logf("relay A drained in %s", took.Round(time.Millisecond))
	for _, m := range []*agent{m1, m2} {
		// Told at once, they hand over: registered elsewhere while the old
		// tunnel serves its last calls.
		waitLog(t, m.proc, `relay replica draining; registering with another while its calls finish`, 10*time.Second)
	}

	// Kill B outright, with whatever it holds.
	relayB.kill()
	queue(5)
	wg.Wait()

	for i, m := range []*agent{m1, m2} {
		r := results[i]
		if r.err != nil {
			t.Fatalf("client of %s: %v", m.id, r.err)
		}
		checkSeq(t, r.evs)
		if got, want := textOf(r.evs), strings.Join(fakeapi.NumberedDeltas(50), ""); got != want {
			t.Fatalf("client of %s got text %q; want %q", m.id, got, want)
		}
		if r.drained == 0 {
			t.Errorf("client of %s never saw RELAY_DRAINING: its stream did not go through A's drain", m.id)
		}
		// The client has what the machine recorded, event for event.
		id := sessionOf(t, r.evs)
		history := resumeAll(t, onMachine(ctx, m.id), pb.NewAgentServiceClient(w.clientTo(cAddr)), id, nil)
		if len(history) < len(r.evs) {
			t.Fatalf("%s recorded %d events; its client received %d", m.id, len(history), len(r.evs))
		}
		for j, ev := range r.evs {
			if ev.Sequence != history[j].Sequence || ev.GetTextDelta().GetText() != history[j].GetTextDelta().GetText() {
				t.Fatalf("%s: client event %d = %v; recorded %v", m.id, j, ev, history[j])
			}
		}
	}

	// Every buffered message reached the model once.
	want := []string{"queued number 1", "queued number 2", "queued number 3", "queued number 4", "queued number 5"}
	if _, err := w.api.Wait(ctx, func(rs []fakeapi.Request) bool { return len(queuedPrompts(rs)) >= len(want) }); err != nil {
		t.Fatalf("waiting for the buffered messages: %v (seen %q)", err, queuedPrompts(w.api.Requests()))
	}
	got := queuedPrompts(w.api.Requests())
	seen := map[string]int{}
	for _, p := range got {
		seen[p]++
	}
	for _, q := range want {
		if seen[q] != 1 {
			t.Errorf("%q reached the model %d times; want once (all: %q)", q, seen[q], got)
		}
	}
}

// queuedPrompts are the lines of the main-loop prompts that carry a queued
// message, once per request that first carried them.
func queuedPrompts(rs []fakeapi.Request) []string {
	var out []string
	last := map[string]bool{}
	for i := range rs {
		if !rs[i].MainLoop() {
			continue
		}
		p := rs[i].Prompt()
		if !strings.Contains(p, "queued number") || last[p] {
			continue
		}
		last[p] = true // a turn's follow-up requests repeat its prompt
		for _, l := range strings.Split(p, "\n") {
			if strings.Contains(l, "queued number") {
				out = append(out, strings.TrimSpace(l))
			}
		}
	}
	return out
}

// converseResuming runs one turn on a Converse stream as the Go client does:
// when the stream fails with UNAVAILABLE it reopens it (on a new
// connection, if the relay sent a GOAWAY) and resumes the session from the
// last sequence it received. started gets a value once ten deltas arrived.
// It returns the events up to TurnComplete and how many times the relay
// said it drains.
func converseResuming(ctx context.Context, cc *grpc.ClientConn, project, prompt string, started chan<- struct{}) ([]*pb.AgentEvent, int, error) {
	api := pb.NewAgentServiceClient(cc)
	var (
		all      []*pb.AgentEvent
		session  string
		drained  int
		deltas   int
		announce = true
	)
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		sctx, cancel := context.WithCancel(ctx)
		s, err := api.Converse(sctx)
		if err == nil {
			if session == "" {
				s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: project}}})
				s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: prompt}}})
			} else {
				from := all[len(all)-1].Sequence
				s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{SessionId: session,
					WorkingDirectory: project, Metadata: map[string]string{"from_sequence": strconv.FormatUint(from, 10)}}}})
			}
			for {
				var ev *pb.AgentEvent
				ev, err = s.Recv()
				if err != nil {
					break
				}
				wait = 100 * time.Millisecond
				if len(all) > 0 && ev.Sequence <= all[len(all)-1].Sequence {
					continue // already had it
				}
				all = append(all, ev)
				if si := ev.GetSessionInfo(); si != nil {
					session = si.SessionId
				}
				if ev.GetTextDelta() != nil {
					if deltas++; deltas == 10 && announce {
						announce = false
						started <- struct{}{}
					}
				}
				if isTurnComplete(ev) {
					cancel()
					return all, drained, nil
				}
			}
		}
		cancel()
		if errors.Is(err, io.EOF) || status.Code(err) != codes.Unavailable {
			return all, drained, err
		}
		if strings.Contains(errDetails(err), "RELAY_DRAINING") {
			drained++
		}
		if session == "" {
			return all, drained, errors.New("stream broke before the session was known: " + err.Error())
		}
		sleepCtx(ctx, wait)
		wait = min(2*wait, 2*time.Second)
	}
	return all, drained, ctx.Err()
}

// sleepCtx waits d or until ctx ends: a client's backoff between attempts.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// waitLog polls p's log (a process outside the test's control) until it
// contains substr.
func waitLog(t *testing.T, p *proc, substr string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.Log(), substr) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q in the log within %s:\n%s", p.name, substr, d, p.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// balancer is a TCP load balancer in front of relay replicas, as a
// Kubernetes Service is: each connection goes to the next backend that
// accepts it (a draining or dead replica refuses connections).
type balancer struct {
	ln       net.Listener
	mu       sync.Mutex
	backends []string
	next     int
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
}

func newBalancer(t *testing.T, backends ...string) *balancer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{ln: ln, backends: backends, conns: map[net.Conn]struct{}{}}
	b.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.wg.Go(func() { b.serve(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		b.closed = true
		for c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *balancer) addr() string { return b.ln.Addr().String() }

// set replaces the backends (for new connections).
func (b *balancer) set(backends ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = backends
}

// serve pipes c to the first backend, round robin, that accepts.
func (b *balancer) serve(c net.Conn) {
	b.mu.Lock()
	backends := append([]string(nil), b.backends...)
	first := b.next
	b.next++
	b.mu.Unlock()
	var u net.Conn
	for i := range backends {
		var err error
		if u, err = net.DialTimeout("tcp", backends[(first+i)%len(backends)], time.Second); err == nil {
			break
		}
	}
	if u == nil {
		c.Close()
		return
	}
	if !b.track(c, u) {
		return
	}
	var pipes sync.WaitGroup
	pipes.Go(func() { io.Copy(u, c); u.Close() })
	pipes.Go(func() { io.Copy(c, u); c.Close() })
	pipes.Wait()
	b.mu.Lock()
	delete(b.conns, c)
	delete(b.conns, u)
	b.mu.Unlock()
}

// track records c and u for Cleanup; false (both closed) once it ran.
func (b *balancer) track(c, u net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		c.Close()
		u.Close()
		return false
	}
	b.conns[c] = struct{}{}
	b.conns[u] = struct{}{}
	return true
}
