package server

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/router"
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
	d := newDrain(slog.New(slog.DiscardHandler))
	ctx := t.Context()

	unaryCtx, unaryDone, ok := d.Admit(ctx, false)
	if !ok || unaryCtx != ctx {
		t.Fatalf("Admit(unary) before the drain = %v, %v; want the call's own context", unaryCtx, ok)
	}
	streamCtx, streamDone, ok := d.Admit(ctx, true)
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
	for _, stream := range []bool{false, true} {
		if _, _, ok := d.Admit(ctx, stream); ok {
			t.Fatalf("Admit(stream=%v) while draining admitted the call", stream)
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
	d := newDrain(slog.New(slog.DiscardHandler))
	_, done, ok := d.Admit(t.Context(), false)
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
	st := status.Convert(drainingErr())
	if st.Code() != codes.Unavailable {
		t.Fatalf("code = %s; want UNAVAILABLE", st.Code())
	}
	for _, det := range st.Details() {
		if info, ok := det.(*errdetails.ErrorInfo); ok && info.Reason == router.CodeRelayDraining && info.Domain == "betcode.dev" {
			return
		}
	}
	t.Fatalf("details %v lack ErrorInfo %s", st.Details(), router.CodeRelayDraining)
}
