package watchgroup

import (
	"context"
	"testing"
	"time"
)

func TestCloseEndsAndWaits(t *testing.T) {
	g := New()
	ctx, leave, ok := g.Join(t.Context())
	if !ok {
		t.Fatal("Join on an open group failed")
	}
	left := make(chan struct{})
	go func() {
		<-ctx.Done()
		close(left)
		leave()
	}()
	closed := make(chan struct{})
	go func() {
		g.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	select {
	case <-left:
	default:
		t.Fatal("Close returned before the call left")
	}
	if !g.Closed() {
		t.Error("Closed() = false after Close")
	}
	if _, _, ok := g.Join(t.Context()); ok {
		t.Error("Join after Close succeeded")
	}
	g.Close() // idempotent
}

func TestParentContextEnds(t *testing.T) {
	g := New()
	defer g.Close()
	parent, cancel := context.WithCancel(t.Context())
	ctx, leave, ok := g.Join(parent)
	if !ok {
		t.Fatal("Join failed")
	}
	cancel()
	<-ctx.Done()
	leave()
	if g.Closed() {
		t.Error("a caller's cancel closed the group")
	}
}
