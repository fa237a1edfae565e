package oidcsvc

import (
	"testing"
	"time"
)

func TestSeenTokens(t *testing.T) {
	var s seenTokens
	now := time.Unix(1_000_000, 0)
	if !s.first("a", now.Add(time.Minute), now) {
		t.Fatal("first use refused")
	}
	if s.first("a", now.Add(time.Minute), now.Add(30*time.Second)) {
		t.Fatal("second use while alive accepted")
	}
	if !s.first("b", now.Add(time.Minute), now) {
		t.Fatal("another token refused")
	}
	// Full: expired entries go first, then any; a new token is never refused.
	for i := range maxSeen {
		s.first(string(rune(i))+"x", now.Add(time.Hour), now)
	}
	if len(s.seen) > maxSeen {
		t.Fatalf("%d remembered, bound %d", len(s.seen), maxSeen)
	}
	if !s.first("new", now.Add(time.Hour), now.Add(2*time.Minute)) || len(s.seen) > maxSeen {
		t.Fatalf("full cache: new token refused or bound passed (%d)", len(s.seen))
	}
}
