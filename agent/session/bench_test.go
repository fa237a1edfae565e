package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// buildFakeClaude builds the fake CLI into a temporary directory of b. The
// Go build cache makes this a link step after the first time.
func buildFakeClaude(b *testing.B) string {
	b.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(b.TempDir(), "fakeclaude")
	cmd := exec.Command("go", "build", "-o", bin, "./internal/fakeclaude")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build fakeclaude: %v\n%s", err, out)
	}
	return bin
}

// errTurnDone ends a Stream once the turn's TurnComplete has been received.
var errTurnDone = errors.New("turn complete")

// turnStats is what one client saw of one turn.
type turnStats struct {
	events int
	cuts   int             // times the client was cut off as too slow and resumed
	lat    []time.Duration // emit (event timestamp) to client receipt
}

// runTurn sends prompt and streams the session as one client until the
// turn's TurnComplete, returning what the client received. A client cut off
// for falling behind resumes from its last sequence, as real clients do.
func runTurn(ctx context.Context, s *Session, prompt string, expect int) (turnStats, error) {
	st := turnStats{lat: make([]time.Duration, 0, expect+16)}
	errc := make(chan error, 1)
	go func() {
		from := s.LastSeq()
		for {
			err := s.Stream(ctx, StreamOptions{From: from}, func(ev *pb.AgentEvent) error {
				st.lat = append(st.lat, time.Since(ev.Timestamp.AsTime()))
				st.events++
				from = ev.Sequence
				if ev.GetTurnComplete() != nil {
					return errTurnDone
				}
				return nil
			})
			if !errors.Is(err, ErrSlowConsumer) {
				errc <- err
				return
			}
			st.cuts++
		}
	}()
	if err := s.SendUser(ctx, prompt, nil); err != nil {
		return st, err
	}
	if err := <-errc; !errors.Is(err, errTurnDone) {
		return st, fmt.Errorf("stream ended after %d events: %w", st.events, err)
	}
	return st, nil
}

// BenchmarkBridge measures the whole bridge: the fake CLI writes b.N
// text-delta stream_event lines as fast as it can ("FLOOD n"), and the
// session decodes and translates them, gives each a sequence, persists it
// through the batched event log and, once committed, fans it out to one
// subscribed client. One op is one text delta received by the client; the
// clock stops when the turn's TurnComplete reaches the client.
//
// procs=1 runs the agent side on one core (GOMAXPROCS=1, the target); the
// fake CLI is a separate process and uses the other core. It reports
// events/s and the latency from emit (the event's timestamp, taken just
// before it is appended) to the client's receipt, which covers queueing,
// the durable commit and the fan-out. The client is a goroutine of this
// process; when it is cut off as a slow consumer (the producer outruns the
// log, so the queue is always full) it resumes, and slow-consumer-cuts
// counts how often.
//
// The cli=cat variants take the fake CLI's JSON encoding off the machine's
// second core: the same lines, recorded from the fake CLI before the timer
// starts, are written by cat, so the agent, not its source, sets the pace.
// (The CLI process then starts inside the timed turn; that costs about a
// millisecond.)
func BenchmarkBridge(b *testing.B) {
	bin := buildFakeClaude(b)
	for _, cli := range []string{"fakeclaude", "cat"} {
		for _, procs := range []int{1, 2} {
			b.Run(fmt.Sprintf("cli=%s/procs=%d", cli, procs), func(b *testing.B) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				benchBridge(b, bin, cli == "cat")
			})
		}
	}
}

// recordedCLI records the fake CLI's output for prompt and returns a CLI
// that, after reading its initialize request and the user message, writes
// that output with cat and exits.
func recordedCLI(b *testing.B, fake, prompt string) string {
	b.Helper()
	dir := b.TempDir()
	out := filepath.Join(dir, "turn.ndjson")
	f, err := os.Create(out)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	user, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": prompt}})
	cmd := exec.Command(fake)
	cmd.Stdin, cmd.Stdout = bytes.NewReader(append(user, '\n')), f
	if err := cmd.Run(); err != nil {
		b.Fatalf("record fake CLI: %v", err)
	}
	bin := filepath.Join(dir, "claude")
	script := "#!/bin/sh\nread -r _\nread -r _\nexec cat '" + out + "'\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		b.Fatal(err)
	}
	return bin
}

func benchBridge(b *testing.B, fake string, recorded bool) {
	ctx := context.Background()
	prompt := fmt.Sprintf("FLOOD %d", b.N)
	bin := fake
	if recorded {
		bin = recordedCLI(b, fake, prompt)
	}
	m, err := Open(ctx, Config{ClaudeBin: bin, DefaultDir: b.TempDir()}, filepath.Join(b.TempDir(), "agent.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(ctx)
	s, err := m.Create(ctx, CreateRequest{})
	if err != nil {
		b.Fatal(err)
	}
	if !recorded {
		// The first turn starts the CLI; keep process start-up out of the
		// timing.
		if _, err := runTurn(ctx, s, "FLOOD 1000", 1000); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	st, err := runTurn(ctx, s, prompt, b.N)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if st.events < b.N {
		b.Fatalf("client received %d events, want at least %d", st.events, b.N)
	}
	b.ReportMetric(float64(st.events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(st.cuts), "slow-consumer-cuts")
	reportLatency(b, st.lat, "emit-to-client")
}

// reportLatency reports the p50, p99 and maximum of lat in microseconds.
func reportLatency(b *testing.B, lat []time.Duration, name string) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(pct(0.50), name+"-p50-µs")
	b.ReportMetric(pct(0.99), name+"-p99-µs")
	b.ReportMetric(pct(1), name+"-max-µs")
}
