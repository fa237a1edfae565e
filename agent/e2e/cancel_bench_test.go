package e2e

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// BenchmarkCancelToTurnComplete measures, with the real CLI, the time from
// the CancelTurn RPC to the client receiving TurnComplete{cancelled} while
// text streams. Target: median under 500 ms.
func BenchmarkCancelToTurnComplete(b *testing.B) {
	t := b
	api := testenv.FakeAPI(b)
	agent := testenv.StartAgent(b, testenv.AgentOptions{APIURL: api.URL()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := agent.API.Converse(ctx)
	if err != nil {
		b.Fatal(err)
	}
	s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: agent.ProjectDir(b)}}})
	id := sessionID(t, until(t, s, isSessionInfo))
	var d []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		say(t, s, "SLOW story")
		until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetTextDelta().GetText() != "" })
		start := time.Now()
		if _, err := agent.API.CancelTurn(ctx, &pb.CancelTurnRequest{SessionId: id}); err != nil {
			b.Fatal(err)
		}
		evs := until(t, s, isTurnComplete)
		d = append(d, time.Since(start))
		if r := last(evs).GetTurnComplete().StopReason; r != "cancelled" {
			b.Fatalf("stop_reason %q", r)
		}
	}
	b.StopTimer()
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	b.ReportMetric(float64(d[len(d)/2].Milliseconds()), "median-ms")
	b.ReportMetric(float64(d[len(d)*99/100].Milliseconds()), "p99-ms")
}
