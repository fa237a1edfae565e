package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// busySessions is how many sessions BenchmarkBusyAgent streams at once.
const busySessions = 20

// BenchmarkBusyAgent is issue 23's "the agent under 20 concurrent sessions
// streaming: its own overhead in CPU per event and RSS": a real
// betcode-agent process (built without -race) runs 20 sessions at once,
// each a turn of the fake CLI writing deltas as fast as it can ("FLOOD n"),
// each streamed to its own Converse client. Every event is bridged from the
// CLI's NDJSON, sequenced, written to SQLite and sent, as with the real CLI.
//
// It reports the agent process's own CPU time (utime + stime of
// /proc/PID/stat; the fake CLIs are other processes) per event the clients
// received, its events per second, its peak RSS (VmHWM) and its RSS once the
// turns are over. Each of b.N rounds runs one turn in every session:
//
//	cd agent && go test -run '^$' -bench BusyAgent -benchtime 3x ./e2e/
func BenchmarkBusyAgent(b *testing.B) {
	// A CLI for each session at once (the pool's default follows the cores).
	pid, conn := startAgentProcess(b, "--max-processes", strconv.Itoa(busySessions))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	api := pb.NewAgentServiceClient(conn)
	deltas := envInt("BETCODE_BENCH_DELTAS", 5000)
	work := b.TempDir()

	streams := make([]pb.AgentService_ConverseClient, busySessions)
	for i := range streams {
		s, err := api.Converse(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: work}}}); err != nil {
			b.Fatal(err)
		}
		if ev, err := s.Recv(); err != nil || ev.GetSessionInfo() == nil {
			b.Fatalf("session %d: first event %v, %v; want SessionInfo", i, ev, err)
		}
		streams[i] = s
	}
	// A first turn in each session starts its CLI: not part of the figures.
	if _, err := busyRound(streams, 10); err != nil {
		b.Fatal(err)
	}
	before := settledRSS(b, pid, "VmRSS")

	b.ResetTimer()
	cpu0, start := processCPU(b, pid), time.Now()
	var events int
	for range b.N {
		n, err := busyRound(streams, deltas)
		if err != nil {
			b.Fatal(err)
		}
		events += n
	}
	elapsed, cpu := time.Since(start), processCPU(b, pid)-cpu0
	b.StopTimer()
	peak := settledRSS(b, pid, "VmHWM")
	after := settledRSS(b, pid, "VmRSS")
	b.ReportMetric(float64(cpu.Microseconds())/float64(events), "agent-CPU-µs/event")
	b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
	b.ReportMetric(cpu.Seconds()/elapsed.Seconds(), "agent-cores")
	b.ReportMetric(before, "before-MiB")
	b.ReportMetric(peak, "peak-MiB")
	b.ReportMetric(after, "after-MiB")
}

// busyRound sends "FLOOD deltas" to every stream at once and reads each
// until its turn completes; it returns the events received in all.
func busyRound(streams []pb.AgentService_ConverseClient, deltas int) (int, error) {
	var wg sync.WaitGroup
	counts := make([]int, len(streams))
	errs := make([]error, len(streams))
	for i, s := range streams {
		wg.Go(func() {
			msg := &pb.UserMessage{Content: fmt.Sprintf("FLOOD %d", deltas)}
			if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: msg}}); err != nil {
				errs[i] = fmt.Errorf("session %d: send: %w", i, err)
				return
			}
			for {
				ev, err := s.Recv()
				if err != nil {
					errs[i] = fmt.Errorf("session %d: after %d events: %w", i, counts[i], err)
					return
				}
				counts[i]++
				if e := ev.GetError(); e != nil {
					errs[i] = fmt.Errorf("session %d: %s", i, e.GetMessage())
					return
				}
				if ev.GetTurnComplete() != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for i, n := range counts {
		if errs[i] != nil {
			return 0, errs[i]
		}
		if n < deltas {
			return 0, fmt.Errorf("session %d: %d events for %d deltas", i, n, deltas)
		}
		total += n
	}
	return total, nil
}

// processCPU is pid's own user and system CPU time so far (not its
// children's), from /proc/PID/stat.
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after it start past the last ')'. utime and stime are
	// fields 14 and 15, in clock ticks (100 a second on Linux).
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("parse /proc/%d/stat: %v %v", pid, err1, err2)
	}
	return time.Duration(utime+stime) * (time.Second / 100)
}

// envInt is the positive integer in the environment variable name, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
