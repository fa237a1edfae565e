package tunnel

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// sendRecorder is a FrameStream that records what is sent (copying the
// bytes, as a gRPC stream marshals them before Send returns). If gate is
// set, each Send first reports on entered and waits for gate.
type sendRecorder struct {
	entered chan struct{}
	gate    chan struct{}

	mu     sync.Mutex
	data   [][]byte
	beats  int
	failed error // returned by Send once set
}

func (r *sendRecorder) Send(f *pb.TunnelFrame) error {
	if r.gate != nil {
		r.entered <- struct{}{}
		<-r.gate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed != nil {
		return r.failed
	}
	switch pl := f.Payload.(type) {
	case *pb.TunnelFrame_Stream:
		r.data = append(r.data, bytes.Clone(pl.Stream.Data))
	case *pb.TunnelFrame_Heartbeat:
		r.beats++
	}
	return nil
}

func (r *sendRecorder) Recv() (*pb.TunnelFrame, error) { return nil, io.EOF }

func (r *sendRecorder) frames() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.data
}

// waitIdle waits until c's send goroutine has stopped.
func waitIdle(c *Conn) {
	c.mu.Lock()
	var stopped chan struct{}
	if c.sending {
		stopped = make(chan struct{})
		c.flushed = stopped
	}
	c.mu.Unlock()
	if stopped != nil {
		<-stopped
	}
}

// An idle Conn has no send goroutine and no large buffer; the next write
// starts sending again.
func TestConnSendsThenGoesIdle(t *testing.T) {
	rec := &sendRecorder{}
	c := NewConn(rec, nil, Addr("a"), Addr("b"))
	defer c.Close()
	big := bytes.Repeat([]byte("x"), 600<<10)
	if _, err := c.Write(big); err != nil {
		t.Fatal(err)
	}
	waitIdle(c)
	c.mu.Lock()
	sending, pending := c.sending, c.pending
	c.mu.Unlock()
	if sending || pending != nil {
		t.Fatalf("after the burst: sending=%v, pending cap %d; want no goroutine and no buffer", sending, cap(pending))
	}
	if got := bytes.Join(rec.frames(), nil); !bytes.Equal(got, big) {
		t.Fatalf("sent %d bytes, want %d", len(got), len(big))
	}
	for _, f := range rec.frames() {
		if len(f) > maxSendBytes {
			t.Fatalf("a frame of %d bytes, more than %d", len(f), maxSendBytes)
		}
	}

	c.SendHeartbeat()
	if _, err := c.Write([]byte("again")); err != nil {
		t.Fatal(err)
	}
	waitIdle(c)
	fr := rec.frames()
	if last := fr[len(fr)-1]; string(last) != "again" || rec.beats != 1 {
		t.Fatalf("after idling: last frame %q, %d heartbeats; want \"again\", 1", last, rec.beats)
	}
}

// Writes made while a frame is being sent leave together in the next one.
func TestConnCoalescesWrites(t *testing.T) {
	rec := &sendRecorder{entered: make(chan struct{}), gate: make(chan struct{})}
	c := NewConn(rec, nil, Addr("a"), Addr("b"))
	c.Write([]byte("first"))
	<-rec.entered // "first" is being sent
	for _, s := range []string{"a", "b", "c"} {
		c.Write([]byte(s))
	}
	rec.gate <- struct{}{}
	<-rec.entered
	rec.gate <- struct{}{}
	waitIdle(c)
	fr := rec.frames()
	if len(fr) != 2 || string(fr[0]) != "first" || string(fr[1]) != "abc" {
		t.Fatalf("frames %q, want [first abc]", fr)
	}
	close(rec.gate) // Close must not block on the gate now
	c.Close()
}

// Close sends what is pending before it ends the stream; writes after
// Close fail.
func TestConnCloseFlushes(t *testing.T) {
	rec := &sendRecorder{entered: make(chan struct{}), gate: make(chan struct{})}
	aborted := make(chan struct{})
	c := NewConn(rec, func() { close(aborted) }, Addr("a"), Addr("b"))
	c.Write([]byte("one"))
	<-rec.entered
	c.Write([]byte("two"))
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	rec.gate <- struct{}{}
	<-rec.entered
	rec.gate <- struct{}{}
	<-closed
	<-aborted
	if got := bytes.Join(rec.frames(), nil); string(got) != "onetwo" {
		t.Fatalf("sent %q before closing, want onetwo", got)
	}
	if _, err := c.Write([]byte("late")); err == nil {
		t.Fatal("Write after Close succeeded")
	}
}

// A failed Send fails the writes that follow.
func TestConnSendError(t *testing.T) {
	boom := errors.New("boom")
	rec := &sendRecorder{failed: boom}
	c := NewConn(rec, nil, Addr("a"), Addr("b"))
	defer c.Close()
	c.Write([]byte("x"))
	waitIdle(c)
	if _, err := c.Write([]byte("y")); !errors.Is(err, boom) {
		t.Fatalf("Write after a failed send: %v, want %v", err, boom)
	}
}
