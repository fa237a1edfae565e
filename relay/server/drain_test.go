package server

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/router"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// recordSteps returns drainSteps that record their order in *got.
func recordSteps(mu *sync.Mutex, got *[]string) drainSteps {
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		*got = append(*got, s)
	}
	return drainSteps{
		notReady:      func() { note("notReady") },
		closeListener: func() { note("closeListener") },
		closeClients:  func(context.Context) { note("closeClients") },
		closeTunnels:  func() { note("closeTunnels") },
		stopAgents:    func(context.Context) { note("stopAgents") },
	}
}

func TestDrainEndsStreamsWaitsForUnaryCallsThenRefuses(t *testing.T) {
	d := newDrain(slog.New(slog.DiscardHandler), nil)
	ctx := t.Context()

	unaryCtx, unaryDone, ok := d.Admit(ctx, router.CallUnary)
	if !ok || unaryCtx != ctx {
		t.Fatalf("Admit(unary) before the drain = %v, %v; want the call's own context", unaryCtx, ok)
	}
	streamCtx, streamDone, ok := d.Admit(ctx, router.CallStream)
	if !ok {
		t.Fatal("Admit(stream) before the drain refused")
	}
	defer streamDone()

	var mu sync.Mutex
	var got []string
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		d.run(ctx, recordSteps(&mu, &got))
	}()

	// The stream ends at once; the unary call holds the drain.
	select {
	case <-streamCtx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the drain did not end the stream")
	}
	for _, kind := range []router.CallKind{router.CallUnary, router.CallStream} {
		if _, _, ok := d.Admit(ctx, kind); ok {
			t.Fatalf("Admit(%v) while draining admitted the call", kind)
		}
	}
	select {
	case <-drained:
		t.Fatal("the drain finished while a unary call ran")
	default:
	}
	unaryDone()
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("the drain did not finish once the unary call ended")
	}
	if unaryCtx.Err() != nil {
		t.Fatal("the drain ended a unary call")
	}
	// closeClients runs alongside the rest; the others in this order.
	mu.Lock()
	defer mu.Unlock()
	inOrder := slices.DeleteFunc(slices.Clone(got), func(s string) bool { return s == "closeClients" })
	if want := []string{"notReady", "closeListener", "closeTunnels", "stopAgents"}; !slices.Equal(inOrder, want) || len(got) != 5 {
		t.Fatalf("steps = %v; want %v and closeClients", got, want)
	}
}

func TestDrainGraceEndsAStuckUnaryCall(t *testing.T) {
	d := newDrain(slog.New(slog.DiscardHandler), nil)
	_, done, ok := d.Admit(t.Context(), router.CallUnary)
	if !ok {
		t.Fatal("refused before the drain")
	}
	defer done()
	ctx, cancel := context.WithCancel(t.Context())
	var mu sync.Mutex
	var got []string
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		d.run(ctx, recordSteps(&mu, &got))
	}()
	cancel() // the grace is over (or a second signal)
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("the drain outlived its grace")
	}
}

func TestDrainingErrCarriesTheBetCodeCode(t *testing.T) {
	if err := drainingErr(); !isDrainingErr(err) {
		t.Fatalf("drainingErr() = %v; want UNAVAILABLE with ErrorInfo %s", status.Convert(err).Proto(), router.CodeRelayDraining)
	}
}

// isDrainingErr reports whether err is UNAVAILABLE with the ErrorInfo
// RELAY_DRAINING: what clients retry at once on another replica.
func isDrainingErr(err error) bool {
	st := status.Convert(err)
	if st.Code() != codes.Unavailable {
		return false
	}
	for _, det := range st.Details() {
		if info, ok := det.(*errdetails.ErrorInfo); ok && info.Reason == router.CodeRelayDraining && info.Domain == "betcode.dev" {
			return true
		}
	}
	return false
}

// TestDrainMetrics checks that the drain counts what it refuses (by kind)
// and the streams it ends, and flags itself draining; the metrics pass
// promlint.
func TestDrainMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	d := newDrain(slog.New(slog.DiscardHandler), reg)
	ctx := t.Context()
	var streamCtxs []context.Context
	for range 2 {
		sctx, done, ok := d.Admit(ctx, router.CallStream)
		if !ok {
			t.Fatal("Admit(stream) before the drain refused")
		}
		defer done()
		streamCtxs = append(streamCtxs, sctx)
	}
	// A stream that ended before the drain is not counted as ended by it.
	_, doneEarly, _ := d.Admit(ctx, router.CallStream)
	doneEarly()
	if v := testutil.ToFloat64(d.m.draining); v != 0 {
		t.Fatalf("betcode_relay_draining before the drain = %v, want 0", v)
	}

	var mu sync.Mutex
	var got []string
	d.run(ctx, recordSteps(&mu, &got))
	// The drain ends streams from context.AfterFunc's goroutines: after
	// run returns, not necessarily yet.
	for _, sctx := range streamCtxs {
		select {
		case <-sctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the drain left a stream running")
		}
	}
	refusals := []router.CallKind{router.CallUnary, router.CallUnary, router.CallStream, router.CallBufferable, router.CallDelivery}
	for _, kind := range refusals {
		if _, _, ok := d.Admit(ctx, kind); ok {
			t.Fatalf("Admit(%v) while draining admitted the call", kind)
		}
	}
	tunnels := drainTunnels{d: d}
	if _, err := tunnels.Register(ctx, &pb.RegisterRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("Register while draining: %v, want UNAVAILABLE", err)
	}
	if err := tunnels.OpenTunnel(nil); status.Code(err) != codes.Unavailable {
		t.Fatalf("OpenTunnel while draining: %v, want UNAVAILABLE", err)
	}

	tests := []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"draining", d.m.draining, 1},
		{"ended streams", d.m.endedStreams, 2},
		{"refused unary", d.m.refused.WithLabelValues("unary"), 2},
		{"refused stream", d.m.refused.WithLabelValues("stream"), 1},
		{"refused buffered", d.m.refused.WithLabelValues("buffered"), 1},
		{"refused tunnel", d.m.refused.WithLabelValues("tunnel"), 2},
	}
	for _, tc := range tests {
		if got := testutil.ToFloat64(tc.c); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
	if n := testutil.CollectAndCount(d.m.refused); n != 4 {
		t.Errorf("refused series = %d, want 4 (deliveries are not counted)", n)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) != 0 {
		t.Fatalf("promlint: %v %v", problems, err)
	}
}

// toldStream is an OpenTunnel stream that announces each frame sent on it.
type toldStream struct {
	pb.TunnelService_OpenTunnelServer
	sent chan *pb.TunnelFrame
}

func (s *toldStream) Send(f *pb.TunnelFrame) error {
	s.sent <- f
	return nil
}

// TestDrainTellsHandingOverAgentsFirst: an agent that hands over
// (tunnel.HandoverHeader) is told RELAY_DRAINING as soon as the drain
// starts, while a unary call still runs (it keeps serving that call on its
// old tunnel and registers elsewhere meanwhile: its machine is reachable
// again within a reconnection); an older agent, which ends its tunnel when
// told, only once the unary calls are done.
func TestDrainTellsHandingOverAgentsFirst(t *testing.T) {
	d := newDrain(slog.New(slog.DiscardHandler), nil)
	_, unaryDone, ok := d.Admit(t.Context(), router.CallUnary)
	if !ok {
		t.Fatal("refused before the drain")
	}
	hands := &toldStream{sent: make(chan *pb.TunnelFrame, 1)}
	ends := &toldStream{sent: make(chan *pb.TunnelFrame, 1)}
	if !d.addTunnel(&drainStream{TunnelService_OpenTunnelServer: hands, handover: true}) ||
		!d.addTunnel(&drainStream{TunnelService_OpenTunnelServer: ends}) {
		t.Fatal("tunnels refused before the drain")
	}
	var mu sync.Mutex
	var got []string
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		d.run(t.Context(), recordSteps(&mu, &got))
	}()
	told := func(s *toldStream, who string) {
		t.Helper()
		select {
		case f := <-s.sent:
			if f.GetError().GetCode() != router.CodeRelayDraining {
				t.Fatalf("%s was sent %v, want RELAY_DRAINING", who, f)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s was never told to move", who)
		}
	}
	told(hands, "the agent that hands over, while a unary call runs,")
	select {
	case f := <-ends.sent:
		t.Fatalf("the agent that ends its tunnel when told was sent %v while a unary call ran", f)
	default:
	}
	unaryDone()
	told(ends, "the older agent, once the unary calls were done,")
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("the drain did not finish")
	}
}

// TestDrainClosesTunnelsAfterTheStreamsItEnded: the streams the drain ends
// write their end (RELAY_DRAINING, which their clients take as "resume
// elsewhere") before the tunnels close under them; with agents that hand
// over, nothing else holds the drain that long, and a client read a broken
// tunnel instead (relay/e2e's drain test, in CI).
func TestDrainClosesTunnelsAfterTheStreamsItEnded(t *testing.T) {
	d := newDrain(slog.New(slog.DiscardHandler), nil)
	streamCtx, streamDone, ok := d.Admit(t.Context(), router.CallStream)
	if !ok {
		t.Fatal("Admit(stream) before the drain refused")
	}
	closed := make(chan struct{})
	steps := drainSteps{
		notReady: func() {}, closeListener: func() {}, closeClients: func(context.Context) {},
		closeTunnels: func() { close(closed) }, stopAgents: func(context.Context) {},
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		d.run(t.Context(), steps)
	}()
	<-streamCtx.Done() // the drain ended it; its handler writes the end now
	select {
	case <-closed:
		t.Fatal("the tunnels closed while a stream the drain ended was still writing its end")
	case <-time.After(300 * time.Millisecond):
	}
	streamDone()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the tunnels did not close once the stream was done")
	}
	<-drained
}
