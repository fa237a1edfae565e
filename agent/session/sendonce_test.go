package session

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/agent/eventlog"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// TestSendOnceCommitsTheMessageBeforeItsKey: when SendOnce returns, the
// message's UserInputEvent is committed, not only queued for the log's
// writer. The chaos soak (relay/chaos) found a message lost for good: the
// agent recorded the idempotency key, was killed before the writer
// committed the event, and the client's retry was answered "duplicate".
// What is committed when SendOnce returns is what a kill -9 leaves.
func TestSendOnceCommitsTheMessageBeforeItsKey(t *testing.T) {
	m := newManager(t, Config{DefaultDir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := m.Create(ctx, CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// A busy writer (a flood of deltas streaming) widens the window.
	if err := s.SendUser(ctx, "FLOOD 5000", nil); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		text := fmt.Sprintf("queued %d", i)
		from, err := m.Log().LastSeq(ctx, s.ID()) // committed before the call
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.SendOnce(ctx, fmt.Sprintf("k%d", i), Message{Text: text}); err != nil {
			t.Fatal(err)
		}
		found := false
		if err := m.Log().Since(ctx, s.ID(), from, func(ev eventlog.Event) error {
			var pev pb.AgentEvent
			if proto.Unmarshal(ev.Payload, &pev) == nil && pev.GetUserInput().GetContent() == text {
				found = true
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !found {
			t.Fatalf("SendOnce(%q) returned with its idempotency key recorded but the message not committed to the log", text)
		}
	}
}
