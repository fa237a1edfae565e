package server

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/mem"
)

// readyConn is an agent's TLS connection as the tunnel's gRPC server sees
// it. It implements grpc-go's optional ReadOnReady (the interface of
// google.golang.org/grpc/internal/transport/readyreader), so that the
// transport's reader takes a read buffer from a shared pool only once data
// has arrived and returns it once it has consumed it. With a plain
// *tls.Conn, grpc-go falls back to a bufio.Reader that every connection
// holds for its whole life; thousands of idle tunnels then hold that many
// read buffers for nothing.
type readyConn struct {
	*tls.Conn
	raw   syscall.RawConn
	ready func(fd uintptr) bool // raw.Read's callback, made once

	// mu serialises probe (which moves the read deadline into the past and
	// back) with SetDeadline and SetReadDeadline.
	mu       sync.Mutex
	deadline time.Time // the read deadline the user set
	peek     [1]byte   // only the reader uses it
}

// newReadyConn wraps tc, or returns it as it is if its connection has no
// file descriptor to wait on.
func newReadyConn(tc *tls.Conn) net.Conn {
	sc, ok := tc.NetConn().(syscall.Conn)
	if !ok {
		return tc
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return tc
	}
	c := &readyConn{Conn: tc, raw: raw}
	c.ready = func(fd uintptr) bool {
		for {
			_, _, err := syscall.Recvfrom(int(fd), c.peek[:], syscall.MSG_PEEK)
			if err == syscall.EINTR {
				continue
			}
			// Data, EOF or an error: Read will report it.
			return err != syscall.EAGAIN
		}
	}
	return c
}

// ReadOnReady reads what TLS has already received, or waits until the
// socket is readable and then reads. Only then does it take a buffer of
// size from pool; it returns the buffer (nil if it read nothing) and the
// number of bytes read.
func (c *readyConn) ReadOnReady(size int, pool mem.BufferPool) (*[]byte, int, error) {
	buf := pool.Get(size)
	n, err := c.probe(*buf)
	if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		// Nothing buffered in TLS: wait for the socket without a buffer
		// (RawConn.Read keeps to the user's read deadline).
		pool.Put(buf)
		if err := c.raw.Read(c.ready); err != nil {
			return nil, 0, err
		}
		buf = pool.Get(size)
		n, err = c.Conn.Read(*buf)
	}
	if n == 0 {
		pool.Put(buf)
		return nil, 0, err
	}
	return buf, n, err
}

// probe reads only what the TLS connection already holds (decrypted
// bytes, or whole records read ahead from the socket): with the read
// deadline in the past, tls.Conn.Read decrypts buffered records but fails
// on any socket read with os.ErrDeadlineExceeded, which tls.Conn treats as
// temporary (a partial record stays buffered).
func (c *readyConn) probe(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.Conn.SetReadDeadline(aLongTimeAgo); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if derr := c.Conn.SetReadDeadline(c.deadline); derr != nil && err == nil {
		err = derr
	}
	return n, err
}

var aLongTimeAgo = time.Unix(1, 0)

// SetDeadline sets the read and write deadlines.
func (c *readyConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	return c.Conn.SetDeadline(t)
}

// SetReadDeadline sets the read deadline.
func (c *readyConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	return c.Conn.SetReadDeadline(t)
}
