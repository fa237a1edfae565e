package server

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// countingPool is a mem.BufferPool that counts the buffers out.
type countingPool struct {
	mu  sync.Mutex
	out int
	put chan struct{} // gets a value on every Put, if not nil
}

func (p *countingPool) Get(n int) *[]byte {
	p.mu.Lock()
	p.out++
	p.mu.Unlock()
	b := make([]byte, n)
	return &b
}

func (p *countingPool) Put(*[]byte) {
	p.mu.Lock()
	p.out--
	p.mu.Unlock()
	if p.put != nil {
		p.put <- struct{}{}
	}
}

func (p *countingPool) outstanding() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out
}

// tlsPair returns the server end (a readyConn) and the client end of a
// handshaken TLS connection over loopback TCP.
func tlsPair(t *testing.T) (*readyConn, *tls.Conn) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "relay"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"relay"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		c   net.Conn
		err error
	}
	accepted := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- result{nil, err}
			return
		}
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
		accepted <- result{tc, tc.Handshake()}
	}()
	cc, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: "relay", RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	r := <-accepted
	if r.err != nil {
		t.Fatal(r.err)
	}
	sc, ok := newReadyConn(r.c.(*tls.Conn)).(*readyConn)
	if !ok {
		t.Fatal("newReadyConn did not wrap a TCP connection")
	}
	t.Cleanup(func() { cc.Close(); sc.Close() })
	return sc, cc
}

// readAll calls ReadOnReady until it has want bytes.
func readAll(t *testing.T, c *readyConn, pool *countingPool, size, want int) []byte {
	t.Helper()
	var got []byte
	for len(got) < want {
		buf, n, err := c.ReadOnReady(size, pool)
		if n > 0 {
			got = append(got, (*buf)[:n]...)
			pool.Put(buf)
		}
		if err != nil {
			t.Fatalf("ReadOnReady after %d bytes: %v", len(got), err)
		}
	}
	return got
}

// Records that TLS read ahead of the socket (several in one segment, or
// one larger than the read buffer) must be returned without waiting for
// the socket, which has nothing more to say.
func TestReadyConnReturnsWhatTLSBuffered(t *testing.T) {
	sc, cc := tlsPair(t)
	pool := &countingPool{}
	msgs := [][]byte{[]byte("first"), []byte("second"), bytes.Repeat([]byte("x"), 40<<10)}
	var want []byte
	for _, m := range msgs {
		if _, err := cc.Write(m); err != nil {
			t.Fatal(err)
		}
		want = append(want, m...)
	}
	// The client sends nothing more until all of it has been read: a
	// reader that waited on the socket would hang here.
	done := make(chan []byte, 1)
	go func() { done <- readAll(t, sc, pool, 4<<10, len(want)) }()
	select {
	case got := <-done:
		if !bytes.Equal(got, want) {
			t.Fatalf("read %d bytes, want %d (equal prefix: %v)", len(got), len(want), bytes.HasPrefix(want, got))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadOnReady waited for the socket while TLS held data")
	}
	if n := pool.outstanding(); n != 0 {
		t.Fatalf("%d buffers not returned to the pool", n)
	}
}

// An idle reader holds no buffer: the probe returns its buffer before the
// reader waits for the socket.
func TestReadyConnIdleHoldsNoBuffer(t *testing.T) {
	sc, cc := tlsPair(t)
	pool := &countingPool{put: make(chan struct{}, 1)}
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		buf, n, err := sc.ReadOnReady(1024, pool)
		var b []byte
		if n > 0 {
			b = append(b, (*buf)[:n]...)
		}
		done <- result{b, err}
	}()
	<-pool.put // the probe found nothing and gave its buffer back
	if n := pool.outstanding(); n != 0 {
		t.Fatalf("%d buffers out while waiting for data", n)
	}
	pool.put = nil
	if _, err := cc.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || string(r.b) != "hello" {
		t.Fatalf("ReadOnReady = %q, %v", r.b, r.err)
	}
}

// The read deadline the user sets still applies, to the wait as well.
func TestReadyConnReadDeadline(t *testing.T) {
	sc, cc := tlsPair(t)
	pool := &countingPool{}
	if err := sc.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sc.ReadOnReady(1024, pool); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadOnReady after the deadline: %v, want a deadline error", err)
	}
	if err := sc.SetDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, sc, pool, 1024, 4); string(got) != "late" {
		t.Fatalf("read %q after clearing the deadline", got)
	}
	if n := pool.outstanding(); n != 0 {
		t.Fatalf("%d buffers not returned to the pool", n)
	}
	// A closed peer is an error (EOF), with no buffer held.
	cc.Close()
	if _, _, err := sc.ReadOnReady(1024, pool); err == nil {
		t.Fatal("ReadOnReady after the peer closed: no error")
	}
	if n := pool.outstanding(); n != 0 {
		t.Fatalf("%d buffers not returned to the pool", n)
	}
}
