package acp

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeacp"
)

// TestMain lets the test binary double as the fake ACP agent, and fails
// the run when goroutines of this package outlive the tests.
func TestMain(m *testing.M) {
	fakeacp.Main()
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines of package acp outlived the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines returns the stacks of goroutines (other than the
// caller's) running code of this package, waiting a little for ones that
// are finishing, as goleak does.
func leakedGoroutines() string {
	var leaked []string
	for try := 0; try < 100; try++ {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = leaked[:0]
		for i, g := range strings.Split(string(buf), "\n\n") {
			if i > 0 && strings.Contains(g, "betcode/agent/acp.") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return ""
		}
		time.Sleep(50 * time.Millisecond)
	}
	return strings.Join(leaked, "\n\n")
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
