package e2e

import (
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// userInputAt returns the index of the n-th (from 0) UserInput event of
// evs, or fails.
func userInputAt(t *testing.T, evs []*pb.AgentEvent, n int) int {
	t.Helper()
	for i, ev := range evs {
		if ev.GetUserInput() != nil {
			if n == 0 {
				return i
			}
			n--
		}
	}
	t.Fatalf("fewer UserInput events than %d in %v", n+1, evs)
	return -1
}

// turnEvent reports whether ev is something a turn produces (as opposed to
// session bookkeeping such as SessionInfo).
func turnEvent(ev *pb.AgentEvent) bool {
	return ev.GetTextDelta() != nil || ev.GetToolCallStart() != nil || ev.GetToolCallResult() != nil ||
		ev.GetUsage() != nil || ev.GetTurnComplete() != nil || ev.GetStatusChange() != nil ||
		ev.GetPermissionRequest() != nil || ev.GetUserQuestion() != nil || ev.GetError() != nil
}

// A user's message is stored before the turn it starts, with its sender
// and a description of each attachment (never the bytes); the Converse
// client sees it live, and a replay starts the turn with it.
func TestUserInputIsReplayedBeforeItsTurn(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	png, err := os.ReadFile("testdata/pixel.png")
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Repeat("remember the milk\n", 2000) // 36 KB that must not be stored
	s := startConv(t, asUser(ctx, "alice"), agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	id := sessionID(t, until(t, s, isSessionInfo))
	prompt := "what is in these?"
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: prompt, Attachments: []*pb.Attachment{
		{Filename: "pixel.png", MimeType: "image/png", Data: png},
		{Filename: "notes.txt", MimeType: "text/plain", Data: []byte(notes)},
	}}}}); err != nil {
		t.Fatal(err)
	}
	live := until(t, s, isTurnComplete)
	if i := userInputAt(t, live, 0); i != 0 {
		t.Errorf("the live stream's first event after the message is %v, want its UserInput", live[0])
	}

	replay := drain(t, mustResume(t, ctx, agent.API, id, 0))
	checkSequences(t, replay, 0)
	i := userInputAt(t, replay, 0)
	ev := replay[i]
	want := &pb.UserInputEvent{Content: prompt, SentBy: "alice", Attachments: []*pb.AttachmentInfo{
		{Filename: "pixel.png", MimeType: "image/png", Size: uint64(len(png))},
		{Filename: "notes.txt", MimeType: "text/plain", Size: uint64(len(notes))},
	}}
	if !proto.Equal(ev.GetUserInput(), want) {
		t.Errorf("replayed UserInput %v, want %v", ev.GetUserInput(), want)
	}
	if n := proto.Size(ev); n > 1024 {
		t.Errorf("the stored UserInput is %d bytes: attachment content was kept", n)
	}
	firstTurn := -1
	for j, e := range replay {
		if turnEvent(e) {
			firstTurn = j
			break
		}
	}
	if firstTurn < 0 || replay[firstTurn].Sequence <= ev.Sequence {
		t.Errorf("turn's first event %d (seq %d) does not follow the UserInput (seq %d): %v", firstTurn, replay[max(firstTurn, 0)].Sequence, ev.Sequence, replay)
	}
	if got := text(replay[i:]); got != "Hello from the fake model." {
		t.Errorf("turn after the prompt: %q", got)
	}
	_ = s.CloseSend()
	drain(t, s)

	// QueueMessage (what a relay delivers) is recorded the same way, with
	// the relay's user, once per idempotency key.
	for range 2 {
		if _, err := agent.API.QueueMessage(asUser(ctx, "bob"), &pb.QueueMessageRequest{
			SessionId: id, Message: &pb.UserMessage{Content: "and now?"}, IdempotencyKey: "k1",
		}); err != nil {
			t.Fatal(err)
		}
	}
	replay = drain(t, mustResume(t, ctx, agent.API, id, 0))
	firstTC := -1
	for j, e := range replay {
		if isTurnComplete(e) {
			firstTC = j
			break
		}
	}
	second := userInputAt(t, replay, 1)
	if in := replay[second].GetUserInput(); in.Content != "and now?" || in.SentBy != "bob" || len(in.Attachments) != 0 {
		t.Errorf("queued message recorded as %v", in)
	}
	if second < firstTC || text(replay[second:]) != "Hello from the fake model." {
		t.Errorf("queued message at %d, first turn ended at %d: %v", second, firstTC, replay)
	}
	if n := len(userIndexes(replay)); n != 2 {
		t.Errorf("%d UserInput events after a repeated idempotency key, want 2", n)
	}

	// The list shows the last prompt and counts prompts and answers.
	resp, err := agent.API.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if sum := resp.Sessions[0]; sum.LastMessagePreview != "and now?" || sum.MessageCount != 4 {
		t.Errorf("summary preview %q, %d messages; want the last prompt and 4", sum.LastMessagePreview, sum.MessageCount)
	}
}

func userIndexes(evs []*pb.AgentEvent) []int {
	var out []int
	for i, ev := range evs {
		if ev.GetUserInput() != nil {
			out = append(out, i)
		}
	}
	return out
}

// StartSession's prompt is the session's first user input, sent by the
// user the relay named.
func TestStartSessionRecordsItsPrompt(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	resp := startSession(t, asUser(ctx, "carol"), agent.API, &pb.StartSessionRequest{
		WorkingDirectory: agent.ProjectDir(t), Message: &pb.UserMessage{Content: "start here"},
	})
	replay := drain(t, resume(t, ctx, agent.API, resp.Session.Id, false))
	i := userInputAt(t, replay, 0)
	if in := replay[i].GetUserInput(); in.Content != "start here" || in.SentBy != "carol" {
		t.Errorf("first prompt recorded as %v", in)
	}
	for _, e := range replay[:i] {
		if turnEvent(e) {
			t.Errorf("%v precedes the prompt that started the turn", e)
		}
	}
	if text(replay[i:]) != "Hello from the fake model." {
		t.Errorf("replay %v", replay)
	}
}
