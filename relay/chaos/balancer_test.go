package chaos

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// echoServer answers each line with its name and the line.
func echoServer(t *testing.T, name string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					io.WriteString(c, name+" "+sc.Text()+"\n")
				}
			}()
		}
	}()
	return ln
}

func ask(t *testing.T, c net.Conn, r *bufio.Reader) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return "write: " + err.Error()
	}
	l, err := r.ReadString('\n')
	if err != nil {
		return "read: " + err.Error()
	}
	return strings.TrimSpace(l)
}

// TestBalancer: connections go to the backends in turn; a draining backend
// gets no new ones but keeps its own; a dead one's connections are closed
// at once and new ones go elsewhere.
func TestBalancer(t *testing.T) {
	a, b := echoServer(t, "a"), echoServer(t, "b")
	defer b.Close()
	lb, err := NewBalancer([]Target{{Addr: a.Addr().String()}, {Addr: b.Addr().String()}}, 50*time.Millisecond, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", lb.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	c1, r1 := dial()
	c2, r2 := dial()
	got := map[string]bool{ask(t, c1, r1): true, ask(t, c2, r2): true}
	if !got["a ping"] || !got["b ping"] {
		t.Fatalf("two connections answered %v; want one from each backend", got)
	}
	onA, rA := c1, r1
	if !strings.HasPrefix(ask(t, c1, r1), "a") {
		onA, rA = c2, r2
	}

	lb.Drain(0)
	for range 3 {
		c, r := dial()
		if s := ask(t, c, r); s != "b ping" {
			t.Fatalf("with a draining: %q; want b", s)
		}
	}
	if s := ask(t, onA, rA); s != "a ping" {
		t.Fatalf("a's connection while a drains: %q", s)
	}

	a.Close() // a dies: its connection is closed by the balancer
	onA.SetReadDeadline(time.Now().Add(5 * time.Second))
	if l, err := rA.ReadString('\n'); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the dead backend's connection is still open after 5 s: read %q, %v", l, err)
	}
	if n := lb.Conns(0); n != 0 {
		t.Fatalf("%d connections to the dead backend are still open", n)
	}
	if s := ask(t, onA, rA); !strings.HasPrefix(s, "read") && !strings.HasPrefix(s, "write") {
		t.Fatalf("the dead backend's connection still answers: %q", s)
	}
	lb.Up(0) // marked up by mistake: the dial fails and b takes it
	c, r := dial()
	if s := ask(t, c, r); s != "b ping" {
		t.Fatalf("after a died: %q; want b", s)
	}
}
