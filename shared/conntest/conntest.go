// Package conntest gives tests real connections: the two ends of a
// loopback TCP connection, for protocols whose two sides write at once
// (HTTP/2's prefaces), which a net.Pipe, having no buffer, would hold
// forever.
package conntest

import (
	"net"
	"testing"
)

// TCPPair returns the two ends of a loopback TCP connection, a the
// dialling side and b the accepted one; both are closed when the test ends.
func TCPPair(t testing.TB) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	// The kernel completed the connection into the listen queue: Accept
	// returns it at once.
	b, err = ln.Accept()
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}
