package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// longReply streams many deltas slowly enough to disconnect in the middle.
func longReply(n int) fakeapi.Reply {
	return fakeapi.Reply{Deltas: fakeapi.NumberedDeltas(n), Delay: 5 * time.Millisecond}
}

func TestDisconnectMidTurnThenResumeGetsExactlyTheMissedEvents(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	api.Enqueue(longReply(200))

	cctx, cancel := context.WithCancel(ctx)
	s := startConv(t, cctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	say(t, s, "tell me a long story")
	deltas := 0
	seen := until(t, s, func(ev *pb.AgentEvent) bool {
		if ev.GetTextDelta() != nil {
			deltas++
		}
		return deltas == 20
	})
	cancel() // the client drops mid-turn
	id := sessionID(t, seen)
	lastSeq := last(seen).Sequence

	r, err := agent.API.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id, FromSequence: lastSeq})
	if err != nil {
		t.Fatal(err)
	}
	rest := drain(t, r) // history-only: ends after the turn completes
	if len(rest) == 0 || !isTurnComplete(rest[len(rest)-2]) && !isTurnComplete(last(rest)) {
		t.Fatalf("resume did not run to the end of the turn: last %v", last(rest))
	}
	all := append(seen, rest...)
	checkSequences(t, all, 0)
	if got, want := text(all), strings.Join(fakeapi.NumberedDeltas(200), ""); got != want {
		t.Fatalf("joined text differs:\n got %q\nwant %q", got, want)
	}

	// A full replay equals what the client pieced together.
	full, err := agent.API.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	replayed := drain(t, full)
	if len(replayed) != len(all) {
		t.Fatalf("full replay has %d events, client pieced together %d", len(replayed), len(all))
	}
	for i := range all {
		if !proto.Equal(all[i], replayed[i]) {
			t.Fatalf("event %d differs between live and replay:\n%v\n%v", i, all[i], replayed[i])
		}
	}
}

func TestSIGKILLLosesNothingAClientSawAndResumeKeepsContext(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)

	// Turn 1 completes.
	api.Enqueue(fakeapi.Reply{Text: "First answer about alpha."})
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	say(t, s, "first message alpha")
	turn1 := until(t, s, isTurnComplete)
	id := sessionID(t, turn1)

	// Turn 2 is cut by SIGKILL mid-stream.
	api.Enqueue(longReply(400))
	say(t, s, "second message beta")
	deltas := 0
	seen := append(turn1, until(t, s, func(ev *pb.AgentEvent) bool {
		if ev.GetTextDelta() != nil {
			deltas++
		}
		return deltas == 30
	})...)
	agent.Kill()

	agent = agent.Restart(t)
	list, err := agent.API.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil || list.Total != 1 || list.Sessions[0].Id != id {
		t.Fatalf("after restart ListSessions = %v, %v", list, err)
	}
	r, err := agent.API.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	replayed := drain(t, r)
	if len(replayed) < len(seen) {
		t.Fatalf("replay has %d events, the client saw %d", len(replayed), len(seen))
	}
	for i := range seen {
		if !proto.Equal(seen[i], replayed[i]) {
			t.Fatalf("event %d the client saw differs after restart:\n%v\n%v", i, seen[i], replayed[i])
		}
	}
	checkSequences(t, replayed, 0)
	// The interrupted turn was closed so nobody waits for it forever.
	if !isTurnComplete(replayed[len(replayed)-2]) {
		t.Errorf("replay does not end with the interrupted turn closed: %v", replayed[len(replayed)-2:])
	}

	// A new message resumes the CLI with --resume: the model gets the history.
	api.Enqueue(fakeapi.Reply{Text: "Third answer."})
	s2 := startConv(t, ctx, agent.API, &pb.StartConversation{SessionId: id})
	say(t, s2, "third message gamma")
	turn3 := until(t, s2, isTurnComplete)
	if got := text(turn3); got != "Third answer." {
		t.Errorf("turn 3 text = %q", got)
	}
	var resumedInfo bool
	for _, ev := range turn3 {
		if si := ev.GetSessionInfo(); si != nil && si.IsResumed {
			resumedInfo = true
		}
	}
	if !resumedInfo {
		t.Error("no SessionInfo{is_resumed} when the CLI was resumed")
	}
	reqs := api.Requests()
	var lastMain *fakeapi.Request
	for i := range reqs {
		if reqs[i].MainLoop() {
			lastMain = &reqs[i]
		}
	}
	if lastMain == nil {
		t.Fatal("the fake API saw no main-loop request")
	}
	var history []string
	for _, m := range lastMain.Conversation() {
		history = append(history, m.Role+": "+m.Text)
	}
	joined := strings.Join(history, "\n")
	for _, want := range []string{"first message alpha", "First answer about alpha.", "third message gamma"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the resumed request lacks %q; it sent:\n%s", want, joined)
		}
	}
}

func TestAttachFromZeroAtTurnStartGetsFirstEvent(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	for i := 0; i < 5; i++ {
		api.Enqueue(fakeapi.Reply{Text: "short answer"})
		s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
		id := sessionID(t, until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetSessionInfo() != nil }))
		// The watcher attaches from 0 at the same moment the turn starts.
		watch := make(chan []*pb.AgentEvent, 1)
		go func() {
			r, err := agent.API.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id})
			if err != nil {
				watch <- nil
				return
			}
			var evs []*pb.AgentEvent
			for {
				ev, err := r.Recv()
				if err != nil {
					break
				}
				evs = append(evs, ev)
			}
			watch <- evs
		}()
		say(t, s, "go")
		until(t, s, isTurnComplete)
		got := <-watch
		if len(got) == 0 || got[0].Sequence != 1 || got[0].GetSessionInfo() == nil {
			t.Fatalf("round %d: watcher's first event = %v", i, got)
		}
		checkSequences(t, got, 0)
	}
}
