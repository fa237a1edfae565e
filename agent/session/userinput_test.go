package session

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// replayAll returns the session's stored events (copies), waiting until no
// turn runs.
func replayAll(t *testing.T, ctx context.Context, s *Session) []*pb.AgentEvent {
	t.Helper()
	var out []*pb.AgentEvent
	if err := s.Stream(ctx, StreamOptions{UntilIdle: true}, func(ev *pb.AgentEvent) error {
		out = append(out, proto.CloneOf(ev))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// userInputs returns the indexes of the UserInput events in evs.
func userInputs(evs []*pb.AgentEvent) []int {
	var out []int
	for i, ev := range evs {
		if ev.GetUserInput() != nil {
			out = append(out, i)
		}
	}
	return out
}

// followUntil streams s live (from its current sequence) until pred holds
// for an event, which it returns with the events before it.
func followUntil(ctx context.Context, s *Session, from uint64, pred func(*pb.AgentEvent) bool) ([]*pb.AgentEvent, error) {
	var out []*pb.AgentEvent
	errFound := errors.New("found")
	err := s.Stream(ctx, StreamOptions{From: from}, func(ev *pb.AgentEvent) error {
		out = append(out, proto.CloneOf(ev))
		if pred(ev) {
			return errFound
		}
		return nil
	})
	if errors.Is(err, errFound) {
		return out, nil
	}
	return out, err
}

// A message sent while another turn runs (the CLI queues it) and a message
// that restarts a crashed CLI are each recorded before anything their turn
// produces: before the resumed SessionInfo and restart status too.
func TestUserInputPrecedesItsTurn(t *testing.T) {
	m := newManager(t, Config{DefaultDir: t.TempDir(), CancelGrace: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := m.Create(ctx, CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, Message{Text: "HANG please", SentBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := followUntil(ctx, s, 0, func(ev *pb.AgentEvent) bool { return ev.GetTextDelta().GetText() == "hanging" }); err != nil {
		t.Fatal(err)
	}
	// Queued behind the hanging turn.
	if err := s.Send(ctx, Message{Text: "second", SentBy: "bob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	evs := replayAll(t, ctx, s)
	ui := userInputs(evs)
	if len(ui) != 2 {
		t.Fatalf("%d UserInput events, want 2: %v", len(ui), evs)
	}
	first, second := evs[ui[0]].GetUserInput(), evs[ui[1]].GetUserInput()
	if first.Content != "HANG please" || first.SentBy != "alice" || second.Content != "second" || second.SentBy != "bob" {
		t.Errorf("user inputs %v, %v", first, second)
	}
	for i, ev := range evs[:ui[0]] {
		if ev.GetSessionInfo() == nil {
			t.Errorf("event %d before the first prompt: %v", i, ev)
		}
	}
	// The queued message's turn: the last text delta ("Fake answer.") and
	// the last TurnComplete come after its UserInput.
	var lastDelta, lastTC int
	for i, ev := range evs {
		if ev.GetTextDelta().GetText() != "" {
			lastDelta = i
		}
		if ev.GetTurnComplete() != nil {
			lastTC = i
		}
	}
	if evs[lastDelta].GetTextDelta().GetText() != "Fake answer." || lastDelta < ui[1] || lastTC < ui[1] {
		t.Errorf("the queued turn's answer (event %d) or end (event %d) precede its UserInput (event %d): %v", lastDelta, lastTC, ui[1], evs)
	}

	// A crash; the next message restarts the CLI with --resume.
	if err := s.Send(ctx, Message{Text: "CRASH now"}); err != nil {
		t.Fatal(err)
	}
	from := uint64(len(evs))
	if _, err := followUntil(ctx, s, from, func(ev *pb.AgentEvent) bool { return ev.GetTurnComplete() != nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, Message{Text: "after the crash"}); err != nil {
		t.Fatal(err)
	}
	evs = replayAll(t, ctx, s)
	ui = userInputs(evs)
	lastUI := ui[len(ui)-1]
	if got := evs[lastUI].GetUserInput().GetContent(); got != "after the crash" {
		t.Fatalf("last UserInput %q", got)
	}
	restart := -1
	for i, ev := range evs {
		if i > ui[len(ui)-2] && (ev.GetSessionInfo().GetIsResumed() || ev.GetStatusChange().GetMessage() != "" && ev.GetStatusChange().GetStatus() == pb.AgentStatus_THINKING) {
			restart = i
			break
		}
	}
	if restart < 0 || restart < lastUI {
		t.Errorf("restart events at %d, the prompt that caused them at %d: %v", restart, lastUI, evs[ui[len(ui)-2]:])
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Sequence != evs[i-1].Sequence+1 {
			t.Fatalf("gap at %d: %d then %d", i, evs[i-1].Sequence, evs[i].Sequence)
		}
	}
}

// Prompts the agent makes itself (/compact) are not user input: no event,
// and the session's preview still shows the user's last message. A message
// that is refused records nothing either.
func TestInternalAndRefusedMessagesAreNotRecorded(t *testing.T) {
	m := newManager(t, Config{DefaultDir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := m.Create(ctx, CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendUserAs(ctx, "a", "hello\n  there", nil); err != nil {
		t.Fatal(err)
	}
	replayAll(t, ctx, s)
	var lockErr *NoInputLockError
	if err := s.SendUserAs(ctx, "b", "not mine to send", nil); !errors.As(err, &lockErr) {
		t.Fatalf("send without the lock: %v", err)
	}
	s.ReleaseInputLock("a")
	if count := s.Meta().MessageCount; count != 2 {
		t.Errorf("message count %d after one exchange, want 2 (the prompt and the answer)", count)
	}
	if _, err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	evs := replayAll(t, ctx, s)
	var contents []string
	for _, i := range userInputs(evs) {
		contents = append(contents, evs[i].GetUserInput().Content)
	}
	if len(contents) != 1 || contents[0] != "hello\n  there" {
		t.Errorf("user inputs %q, want only the user's message", contents)
	}
	meta := s.Meta()
	if meta.LastMessagePreview != "hello there" {
		t.Errorf("preview %q after compaction, want the user's message", meta.LastMessagePreview)
	}
	if meta.MessageCount != 3 { // + the /compact turn's answer, not its prompt
		t.Errorf("message count %d after compaction, want 3", meta.MessageCount)
	}
}

// Watchers hear of a message at once: the update it causes carries the new
// preview and message count.
func TestUserInputUpdatesWatchers(t *testing.T) {
	m := newManager(t, Config{DefaultDir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := m.Create(ctx, CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *pb.SessionUpdate, 1)
	snapshot := make(chan struct{})
	errFound := errors.New("found")
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- m.Watch(ctx, WatchOptions{}, func(u *pb.SessionUpdate) error {
			if u.SnapshotDone {
				close(snapshot)
			}
			if u.GetCause().GetUserInput() != nil {
				got <- u
				return errFound
			}
			return nil
		})
	}()
	<-snapshot
	if err := s.Send(ctx, Message{Text: "watch this", Attachments: []*pb.Attachment{{Filename: "a.txt", MimeType: "text/plain", Data: []byte("abc")}}}); err != nil {
		t.Fatal(err)
	}
	var u *pb.SessionUpdate
	select {
	case u = <-got:
	case err := <-watchErr:
		t.Fatalf("watch ended: %v", err)
	}
	if u.Session.LastMessagePreview != "watch this" || u.Session.MessageCount != 1 || u.Session.AgentStatus != pb.AgentStatus_THINKING {
		t.Errorf("update %v", u.Session)
	}
	in := u.Cause.GetUserInput()
	if len(in.Attachments) != 1 || !proto.Equal(in.Attachments[0], &pb.AttachmentInfo{Filename: "a.txt", MimeType: "text/plain", Size: 3}) {
		t.Errorf("cause %v", in)
	}
	if err := <-watchErr; !errors.Is(err, errFound) {
		t.Fatal(err)
	}
	replayAll(t, ctx, s)
}
