package e2ee

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

func TestClose(t *testing.T) {
	leakcheck.Goroutines(t)
	dc, mc := open(t, newKey(t), newKey(t))
	read := make(chan error, 1)
	go func() {
		_, err := dc.Read(make([]byte, 10))
		read <- err
	}()
	if err := dc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-read; !errors.Is(err, net.ErrClosed) {
		t.Errorf("pending Read after Close: %v, want net.ErrClosed", err)
	}
	if _, err := dc.Read(make([]byte, 10)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after Close: %v, want net.ErrClosed", err)
	}
	if _, err := dc.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close: %v, want net.ErrClosed", err)
	}
	if err := dc.WriteMessage([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("WriteMessage after Close: %v, want net.ErrClosed", err)
	}
	if err := dc.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close: %v, want net.ErrClosed", err)
	}
	if _, err := mc.Read(make([]byte, 10)); err != io.EOF {
		t.Errorf("the peer's Read: %v, want io.EOF", err)
	}
	if _, err := mc.Read(make([]byte, 10)); err != io.EOF {
		t.Errorf("the peer's second Read: %v, want io.EOF again", err)
	}
}

func TestReadDeadline(t *testing.T) {
	leakcheck.Goroutines(t)
	dc, mc := open(t, newKey(t), newKey(t))
	buf := make([]byte, 10)

	dc.SetReadDeadline(time.Now().Add(-time.Second))
	_, err := dc.Read(buf)
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past the deadline: %v, want a timeout", err)
	}

	// A deadline that passes while Read waits.
	dc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := dc.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read: %v, want os.ErrDeadlineExceeded", err)
	}

	// A deadline moved to now while Read waits.
	done := make(chan error, 1)
	dc.SetReadDeadline(time.Time{})
	go func() {
		_, err := dc.Read(buf)
		done <- err
	}()
	dc.SetDeadline(time.Now())
	if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read: %v, want os.ErrDeadlineExceeded", err)
	}

	// The timeouts lost nothing: a message sent now is read once the
	// deadline is cleared.
	dc.SetDeadline(time.Time{})
	if _, err := mc.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	n, err := dc.Read(buf)
	if err != nil || string(buf[:n]) != "late" {
		t.Errorf("Read after the timeouts: %q, %v", buf[:n], err)
	}
}

func TestWriteDeadline(t *testing.T) {
	leakcheck.Goroutines(t)
	dc, mc := open(t, newKey(t), newKey(t))
	dc.SetWriteDeadline(time.Now().Add(-time.Second))
	if n, err := dc.Write([]byte("x")); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Write past the deadline: %d, %v", n, err)
	}
	dc.SetWriteDeadline(time.Time{})
	if _, err := dc.Write([]byte("y")); err != nil {
		t.Fatalf("Write after the deadline was cleared: %v", err)
	}
	buf := make([]byte, 10)
	if n, err := mc.Read(buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("Read: %q, %v (the timed-out Write must send nothing)", buf[:n], err)
	}
}

func TestMessages(t *testing.T) {
	leakcheck.Goroutines(t)
	dc, mc := open(t, newKey(t), newKey(t))
	msgs := []string{"token bct_x", "", strings.Repeat("z", MaxPayload)}
	for _, m := range msgs {
		if err := mc.WriteMessage([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range msgs {
		got, err := dc.ReadMessage()
		if err != nil || string(got) != want {
			t.Fatalf("ReadMessage: %d bytes, %v; want %d bytes", len(got), err, len(want))
		}
	}
	if err := mc.WriteMessage(make([]byte, MaxPayload+1)); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("WriteMessage over MaxPayload: %v", err)
	}

	// Read skips an empty message; ReadMessage refuses to start inside a
	// message that Read has begun.
	mc.WriteMessage(nil)
	mc.WriteMessage([]byte("abcdef"))
	buf := make([]byte, 2)
	if n, err := dc.Read(buf); err != nil || string(buf[:n]) != "ab" {
		t.Fatalf("Read: %q, %v", buf[:n], err)
	}
	if _, err := dc.ReadMessage(); err == nil || !strings.Contains(err.Error(), "4 bytes of an earlier message unread") {
		t.Errorf("ReadMessage inside a message: %v", err)
	}
	if n, err := dc.Read(make([]byte, 0)); n != 0 || err != nil {
		t.Errorf("empty Read: %d, %v", n, err)
	}
	rest, err := io.ReadAll(io.LimitReader(dc, 4))
	if err != nil || string(rest) != "cdef" {
		t.Errorf("rest: %q, %v", rest, err)
	}
}

func TestSendFilter(t *testing.T) {
	leakcheck.Goroutines(t)
	dc, mc := open(t, newKey(t), newKey(t))
	// The filter sees what Writes left, in order, and its output is what
	// the peer reads.
	mc.SetSendFilter(func(dst, src []byte) []byte { return append(dst, strings.ToUpper(string(src))...) })
	want := ""
	for i := range 200 {
		s := strings.Repeat(string(rune('a'+i%26)), 1+i%50)
		if _, err := mc.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		want += strings.ToUpper(s)
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(dc, got); err != nil || string(got) != want {
		t.Fatalf("read %q, %v; want the writes upper-cased", got, err)
	}
}
