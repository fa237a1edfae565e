package session

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestSendOnceSurvivesARestart: the web app's outbox sends a message again, with the same
// idempotency key, whenever it cannot tell whether the first send arrived (the network dropped
// while it was in flight, the page was frozen, the phone slept). The agent may have restarted in
// between: the key is kept in the session's log, so the repeat is still a duplicate and the
// message is stored, and sent to Claude, exactly once.
func TestSendOnceSurvivesARestart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "agent.db")
	cfg := Config{DefaultDir: t.TempDir()}
	m := openManager(t, cfg, db) // builds the fake CLI first: the deadline starts after
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := m.Create(ctx, CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := s.ID()
	const key, text = "outbox-7f3a", "written while offline"
	if dup, err := s.SendOnce(ctx, key, Message{Text: text}); err != nil || dup {
		t.Fatalf("first SendOnce: dup %v, %v", dup, err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}

	m2 := openManager(t, cfg, db)
	s2, err := m2.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		dup, err := s2.SendOnce(ctx, key, Message{Text: text})
		if err != nil {
			t.Fatal(err)
		}
		if !dup {
			t.Fatal("the same idempotency key after a restart was taken again, want a duplicate")
		}
	}
	stored := 0
	for _, ev := range replayAll(t, ctx, s2) {
		if ev.GetUserInput().GetContent() == text {
			stored++
		}
	}
	if stored != 1 {
		t.Errorf("the message is stored %d times, want once", stored)
	}
}
