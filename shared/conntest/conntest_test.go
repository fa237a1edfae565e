package conntest

import (
	"io"
	"testing"
)

// The two ends are connected both ways, and both may write at once (as
// HTTP/2's prefaces are written) without waiting for the other to read.
func TestTCPPair(t *testing.T) {
	a, b := TCPPair(t)
	if _, err := a.Write([]byte("from a")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write([]byte("from b")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(b, buf); err != nil || string(buf) != "from a" {
		t.Fatalf("b read %q, %v; want \"from a\"", buf, err)
	}
	if _, err := io.ReadFull(a, buf); err != nil || string(buf) != "from b" {
		t.Fatalf("a read %q, %v; want \"from b\"", buf, err)
	}
}
