package acp

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeacp"
	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestMain lets the test binary double as the fake ACP agent, and fails
// the run when goroutines of this package outlive the tests.
func TestMain(m *testing.M) {
	fakeacp.Main()
	leakcheck.Main(m, "betcode/agent/acp")
}

// testLogger logs to the test's output until the test ends. The ACP SDK's
// reading goroutine logs "connection closed" just after it has ended the
// connection, which can be after the test returned; such late lines are
// dropped instead of written to a finished test (a race and a panic).
func testLogger(t testing.TB) *slog.Logger {
	w := &testOutput{w: t.Output()}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testOutput is a test's output that drops what is written once closed.
type testOutput struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (o *testOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return len(p), nil
	}
	return o.w.Write(p)
}

func (o *testOutput) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
}

// stepTimeout bounds each wait for output, so that a bug fails the test
// instead of hanging it.
const stepTimeout = 60 * time.Second

// reader pumps a Stream's output into a channel.
type reader struct {
	t   testing.TB
	out chan provider.Output
	end chan struct{}
}

func newReader(t testing.TB, s provider.Stream) *reader {
	r := &reader{t: t, out: make(chan provider.Output), end: make(chan struct{})}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) }) // runs before the conversation's Stop
	go func() {
		defer close(r.end)
		for {
			o, ok := s.Next()
			if !ok {
				return
			}
			select {
			case r.out <- o:
			case <-stop:
				return
			}
		}
	}()
	return r
}

// next returns the next output; ok is false once the stream ended.
func (r *reader) next() (provider.Output, bool) {
	r.t.Helper()
	select {
	case o := <-r.out:
		return o, true
	case <-r.end:
		return provider.Output{}, false
	case <-time.After(stepTimeout):
		r.t.Fatalf("no output for %s", stepTimeout)
		return provider.Output{}, false
	}
}

// turn reads until the turn ends, answering permission asks with answer
// (nil fails the test on an ask). It returns every output.
func (r *reader) turn(s provider.Stream, answer func(*provider.PermissionAsk) provider.Answer) []provider.Output {
	r.t.Helper()
	var all []provider.Output
	for {
		o, ok := r.next()
		if !ok {
			r.t.Fatalf("stream ended mid-turn; outputs so far: %v", all)
		}
		all = append(all, o)
		if o.Permission != nil {
			if answer == nil {
				r.t.Fatalf("unexpected permission ask %+v", o.Permission)
			}
			if err := s.Answer(o.Permission.ID, answer(o.Permission)); err != nil {
				r.t.Fatal(err)
			}
		}
		if o.TurnEnded {
			return all
		}
	}
}

// waitEnd reads until the stream ends.
func (r *reader) waitEnd() []provider.Output {
	r.t.Helper()
	var all []provider.Output
	for {
		o, ok := r.next()
		if !ok {
			return all
		}
		all = append(all, o)
	}
}

func events(outs []provider.Output) []*pb.AgentEvent {
	var evs []*pb.AgentEvent
	for _, o := range outs {
		evs = append(evs, o.Events...)
	}
	return evs
}

func textOf(evs []*pb.AgentEvent) string {
	s := ""
	for _, e := range evs {
		s += e.GetTextDelta().GetText()
	}
	return s
}

func lastTurnComplete(evs []*pb.AgentEvent) *pb.TurnComplete {
	var tc *pb.TurnComplete
	for _, e := range evs {
		if x := e.GetTurnComplete(); x != nil {
			tc = x
		}
	}
	return tc
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*stepTimeout)
	t.Cleanup(cancel)
	return ctx
}
