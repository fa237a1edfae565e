package h2wire

import (
	"bytes"
	"errors"
	"testing"
)

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken") }

// TestPooledWriter: bytes reach the connection only at Flush, in order; an
// idle writer holds no buffer; after a failed flush the bytes stay.
func TestPooledWriter(t *testing.T) {
	var conn bytes.Buffer
	p := &PooledWriter{W: &conn, Pool: NewWriterPool(64)}
	for _, part := range []string{"one ", "two ", "three"} {
		p.Write([]byte(part))
	}
	if conn.Len() != 0 || p.Buffered() != len("one two three") {
		t.Fatalf("before Flush the connection has %q and %d bytes are buffered", conn.String(), p.Buffered())
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if conn.String() != "one two three" || p.bw != nil || p.Buffered() != 0 {
		t.Fatalf("after Flush: connection %q, buffer held %v", conn.String(), p.bw != nil)
	}
	if err := p.Flush(); err != nil {
		t.Fatalf("a Flush with nothing buffered: %v", err)
	}
	bad := &PooledWriter{W: failingWriter{}, Pool: NewWriterPool(64)}
	bad.Write([]byte("lost?"))
	if err := bad.Flush(); err == nil || bad.Buffered() != len("lost?") {
		t.Fatalf("a failed Flush returned %v and kept %d bytes", err, bad.Buffered())
	}
}
