package acp

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/internal/leakcheck"
	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeacp"
)

// TestMain lets the test binary double as the fake ACP agent, and fails
// the run when goroutines of this package outlive the tests.
func TestMain(m *testing.M) {
	fakeacp.Main()
	leakcheck.Main(m, "betcode/agent/acp")
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
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
