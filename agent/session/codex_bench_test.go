package session

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/codex"
	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// envFakeCodex makes the test binary a fake `codex app-server` (see
// fakeAppServer): the Codex benchmark starts this binary as its Codex.
const envFakeCodex = "BETCODE_BENCH_FAKE_CODEX"

func init() {
	if os.Getenv(envFakeCodex) == "1" {
		os.Exit(fakeAppServer())
	}
}

// BenchmarkCodexPath measures what the session manager adds to a Codex
// conversation's output: a fake app-server (this test binary, re-executed)
// writes item/agentMessage/delta notifications at a fixed rate, each
// carrying the wall-clock time it was written; the real path reads the
// JSON-RPC line (codex.Client), decodes it, translates it (codex.Translator),
// sequences it, appends it to the SQLite event log and, once committed, fans
// it out to one subscribed client (Session.Stream). One op is one delta
// received by the client.
//
// line-to-client is the time from the app-server's write of the line to
// the client's receipt: an upper bound of "JSON-RPC line read to client
// receipt" (it also holds the pipe's wake-up). emit-to-client is the part
// after the session stamped the event (queueing, durable commit, fan-out).
//
// log=disk keeps the event log in the test's temporary directory (fsync
// on the machine's disk, as the agent runs); log=tmpfs in /dev/shm, where
// fsync costs nothing, which leaves the path's own cost.
func BenchmarkCodexPath(b *testing.B) {
	for _, log := range []string{"disk", "tmpfs"} {
		for _, rate := range []int{1000, 200} {
			b.Run(fmt.Sprintf("log=%s/rate=%d", log, rate), func(b *testing.B) { benchCodexPath(b, log == "tmpfs", rate) })
		}
	}
}

func benchCodexPath(b *testing.B, tmpfs bool, rate int) {
	ctx := context.Background()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	logDir := b.TempDir()
	if tmpfs {
		if logDir, err = os.MkdirTemp("/dev/shm", "betcode-bench-"); err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(logDir)
	}
	m, err := Open(ctx, Config{
		ClaudeBin: "claude-unused", DefaultDir: b.TempDir(),
		Providers: provider.NewRegistry(&codex.Provider{Binary: self, Home: b.TempDir(), BaseURL: "http://127.0.0.1:9/v1"}),
	}, filepath.Join(logDir, "agent.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(ctx)
	s, err := m.Create(ctx, CreateRequest{
		Provider: pb.SessionProvider_SESSION_PROVIDER_CODEX, Env: map[string]string{envFakeCodex: "1"},
	})
	if err != nil {
		b.Fatal(err)
	}
	// The first turn starts the app-server; keep its start-up out.
	if _, err := runCodexTurn(ctx, s, 100, rate); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	st, err := runCodexTurn(ctx, s, b.N, rate)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if len(st.line) < b.N {
		b.Fatalf("client received %d deltas, want %d", len(st.line), b.N)
	}
	b.ReportMetric(float64(len(st.line))/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(st.cuts), "slow-consumer-cuts")
	reportLatency(b, st.line, "line-to-client")
	reportLatency(b, st.emit, "emit-to-client")
}

// codexTurnStats is what the client saw of one benchmark turn.
type codexTurnStats struct {
	line, emit []time.Duration
	cuts       int
}

// runCodexTurn asks the fake app-server for n deltas at rate per second
// and streams the session as one client until the turn completes.
func runCodexTurn(ctx context.Context, s *Session, n, rate int) (codexTurnStats, error) {
	st := codexTurnStats{line: make([]time.Duration, 0, n), emit: make([]time.Duration, 0, n)}
	errc := make(chan error, 1)
	from := s.LastSeq()
	go func() {
		for {
			err := s.Stream(ctx, StreamOptions{From: from}, func(ev *pb.AgentEvent) error {
				now := time.Now()
				from = ev.Sequence
				if d := ev.GetTextDelta(); d != nil && !d.IsComplete {
					ns, err := strconv.ParseInt(strings.TrimSpace(d.Text), 10, 64)
					if err != nil {
						return fmt.Errorf("delta %q carries no time: %w", d.Text, err)
					}
					st.line = append(st.line, now.Sub(time.Unix(0, ns)))
					st.emit = append(st.emit, now.Sub(ev.Timestamp.AsTime()))
				}
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
	if err := s.SendUser(ctx, fmt.Sprintf("BENCH %d %d", n, rate), nil); err != nil {
		return st, err
	}
	if err := <-errc; !errors.Is(err, errTurnDone) {
		return st, fmt.Errorf("stream ended after %d deltas: %w", len(st.line), err)
	}
	return st, nil
}

// fakeAppServer speaks enough of the app-server protocol for the session
// manager: initialize, thread/start (or resume), turn/start and
// turn/interrupt. A turn whose text is "BENCH N RATE" streams N agent
// message deltas, RATE per second, each the write time in Unix
// nanoseconds, then completes. It returns the exit code.
func fakeAppServer() int {
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	write := func(v any) {
		b, _ := json.Marshal(v)
		mu.Lock()
		defer mu.Unlock()
		out.Write(b)
		out.WriteByte('\n')
		out.Flush()
	}
	reply := func(id json.RawMessage, result any) {
		write(map[string]any{"id": id, "result": result})
	}
	const thread = "thr-bench"
	var turns sync.WaitGroup
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for k := 1; in.Scan(); {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Input []struct {
					Text string `json:"text"`
				} `json:"input"`
			} `json:"params"`
		}
		if err := json.Unmarshal(in.Bytes(), &req); err != nil || req.ID == nil {
			continue // a notification (initialized) or a reply
		}
		switch req.Method {
		case codex.MethodInitialize:
			reply(req.ID, map[string]any{"userAgent": "fake-app-server", "codexHome": os.Getenv("CODEX_HOME"), "platformFamily": "unix", "platformOs": "linux"})
		case codex.MethodThreadStart, codex.MethodThreadResume:
			reply(req.ID, map[string]any{"thread": map[string]any{"id": thread, "turns": []any{}}, "model": "fake-model", "cwd": "/"})
		case codex.MethodTurnStart:
			turn := "turn-" + strconv.Itoa(k)
			k++
			var n, rate int
			if len(req.Params.Input) > 0 {
				fmt.Sscanf(req.Params.Input[0].Text, "BENCH %d %d", &n, &rate)
			}
			reply(req.ID, map[string]any{"turn": map[string]any{"id": turn, "status": "inProgress", "items": []any{}}})
			turns.Add(1)
			go func() {
				defer turns.Done()
				streamTurn(write, thread, turn, n, rate)
			}()
		default:
			reply(req.ID, map[string]any{})
		}
	}
	turns.Wait()
	return 0
}

// streamTurn writes one turn: started, n paced deltas, completed.
func streamTurn(write func(any), thread, turn string, n, rate int) {
	note := func(method string, params map[string]any) {
		write(map[string]any{"method": method, "params": params})
	}
	turnObj := func(status string) map[string]any {
		return map[string]any{"id": turn, "status": status, "items": []any{}}
	}
	item := map[string]any{"type": "agentMessage", "id": "msg-" + turn, "text": ""}
	note(codex.MethodTurnStarted, map[string]any{"threadId": thread, "turn": turnObj("inProgress")})
	note(codex.MethodItemStarted, map[string]any{"threadId": thread, "turnId": turn, "item": item})
	interval := time.Second / time.Duration(max(rate, 1))
	start := time.Now()
	for i := range n {
		// Pacing the producer (not synchronising with the consumer): a
		// sustainable rate, not a flood.
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		note(codex.MethodAgentMessageDelta, map[string]any{"threadId": thread, "turnId": turn, "itemId": item["id"],
			"delta": strconv.FormatInt(time.Now().UnixNano(), 10) + " "})
	}
	done := map[string]any{"type": "agentMessage", "id": item["id"], "text": "done"}
	note(codex.MethodItemCompleted, map[string]any{"threadId": thread, "turnId": turn, "item": done})
	note(codex.MethodTurnCompleted, map[string]any{"threadId": thread, "turn": turnObj("completed")})
}
