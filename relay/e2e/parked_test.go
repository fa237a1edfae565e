package e2e

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"testing"
	"time"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/promtest"
)

// TestIdleStreamsHoldNoGoroutine: relayed streams with nothing to move
// (conversations between turns) are parked (shared/callpark): the relay
// holds no goroutine for them, yet each still carries a turn both ways
// when its client speaks, and the end-of-call work (the open-streams
// gauge) runs when a parked stream's client leaves.
func TestIdleStreamsHoldNoGoroutine(t *testing.T) {
	const n = 40
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), extraArgs: []string{"--metrics-listen", "127.0.0.1:0"}})
	m := regexp.MustCompile(`relay metrics.* addr=(\S+)`).FindStringSubmatch(w.relay.Log())
	if m == nil {
		t.Fatalf("the relay logged no metrics address:\n%s", w.relay.Log())
	}
	url := "http://" + m[1] + "/metrics"
	metric := func(name string) float64 {
		t.Helper()
		v, ok := promtest.Value(promtest.Scrape(t, url), name)
		if !ok {
			t.Fatalf("no %s in the relay's metrics", name)
		}
		return v
	}
	// waitMetric waits until name's value satisfies ok (the gauges follow
	// the calls' ends a moment later).
	waitMetric := func(name string, ok func(float64) bool, what string) float64 {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			v := metric(name)
			if ok(v) {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s = %v; want %s", name, v, what)
			}
			<-tick.C
		}
	}
	a := w.startAgent("m1", w.addr)
	ctx := ctxT(t, 120*time.Second)
	api := pb.NewAgentServiceClient(w.client())
	if _, err := api.ListSessions(onMachine(ctx, "m1"), &pb.ListSessionsRequest{}); err != nil {
		t.Fatal(err)
	}
	base := waitMetric("betcode_relay_open_streams", func(v float64) bool { return v == 0 }, "0 before the streams")
	goroutines := metric("go_goroutines")

	type conv struct {
		s      pb.AgentService_ConverseClient
		cancel context.CancelFunc
	}
	convs := make([]conv, n)
	for i := range convs {
		sctx, cancel := context.WithCancel(onMachine(ctx, "m1"))
		t.Cleanup(cancel)
		s, err := api.Converse(sctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: a.project}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil { // the session started: the stream is up, then quiet
			t.Fatal(err)
		}
		convs[i] = conv{s, cancel}
	}
	waitMetric("betcode_relay_open_streams", func(v float64) bool { return v == base+n }, fmt.Sprint(base+n))
	// Calls that ended a moment ago may still be unwinding: wait for the
	// count to settle rather than read it once.
	held := waitMetric("go_goroutines", func(v float64) bool { return v-goroutines < n/4 }, fmt.Sprintf("fewer than %d more than %v with %d idle streams", n/4, goroutines, n))
	t.Logf("%d idle relayed streams: relay goroutines %v → %v", n, goroutines, held)

	start := time.Now()
	phase := func(what string) { t.Logf("%6.2fs %s", time.Since(start).Seconds(), what) }
	// A parked stream carries a turn both ways.
	for _, i := range []int{0, n / 2, n - 1} {
		s := convs[i].s
		if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: fmt.Sprintf("hello from stream %d", i)}}}); err != nil {
			t.Fatal(err)
		}
		recvUntil(t, s, isTurnComplete)
		phase(fmt.Sprintf("stream %d carried a turn", i))
	}

	// Clients that leave end their parked calls: the gauge the router
	// decrements at a call's end comes back down.
	for i := range n / 2 {
		convs[i].cancel()
	}
	waitMetric("betcode_relay_open_streams", func(v float64) bool { return v == base+n/2 }, fmt.Sprint(base+n/2))
	phase("half the clients left")
	// The others still answer.
	s := convs[n-1].s
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "still there?"}}}); err != nil {
		t.Fatal(err)
	}
	recvUntil(t, s, isTurnComplete)
	phase("a remaining stream carried a turn")
	// A closed send side ends the call from the agent's side.
	for i := n / 2; i < n; i++ {
		convs[i].s.CloseSend()
	}
	for i := n / 2; i < n; i++ {
		for {
			if _, err := convs[i].s.Recv(); err != nil {
				if err != io.EOF {
					t.Errorf("stream %d ended with %v; want its end (EOF) after CloseSend", i, err)
				}
				break
			}
		}
	}
	phase("the rest ended")
	waitMetric("betcode_relay_open_streams", func(v float64) bool { return v == base }, fmt.Sprint(base))
}
