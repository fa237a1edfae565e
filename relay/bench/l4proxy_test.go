package bench

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
)

// proxyModeEnv makes the test binary the floor path's TCP proxy (l4Main).
const proxyModeEnv = "BETCODE_BENCH_L4_PROXY"

// l4Main is the "l4" path's middle process: a plain TCP proxy in front of
// the agent's direct TLS listener (BETCODE_BENCH_L4_TARGET). It copies bytes
// both ways and parses nothing, so TLS stays end to end between client and
// agent. It is the least any extra process on the path can cost: a relay
// must also end TLS, parse HTTP/2, authenticate and route, so no relay adds
// less to a call than this hop does. It prints "ready ADDR" and runs until
// stdin closes.
func l4Main() int {
	target := os.Getenv("BETCODE_BENCH_L4_TARGET")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "l4 proxy:", err)
		return 1
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		ln.Close()
	}()
	fmt.Printf("ready %s\n", ln.Addr())
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return 0
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			proxyConn(c, target)
		}()
	}
}

// proxyConn copies between c and a new connection to target until either
// side ends. TCP to TCP, io.Copy splices on Linux.
func proxyConn(c net.Conn, target string) {
	defer c.Close()
	u, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(u, c); u.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(c, u); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	<-done
	<-done
}

// startL4Proxy starts the proxy process in front of target and returns its
// address and pid.
func startL4Proxy(tb testing.TB, target string) (addr string, pid int) {
	tb.Helper()
	addr, pid, err := startChild(tb, proxyModeEnv+"=1", "BETCODE_BENCH_L4_TARGET="+target)
	if err != nil {
		tb.Fatalf("l4 proxy did not start: %v", err)
	}
	return addr, pid
}
