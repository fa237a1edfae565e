package h2client

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
)

var benchMsg = frame([]byte("a unary request of modest size, like most relayed calls"))

// benchUnary runs unary echo calls through rt to the grpc-go server at addr.
func benchUnary(b *testing.B, rt http.RoundTripper, addr string) {
	b.ReportAllocs()
	buf := make([]byte, 512)
	for b.Loop() {
		req := grpcReq(context.Background(), addr, "/t/Echo", newBufBody(benchMsg))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			m, err := resp.Body.Read(buf[n:])
			n += m
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		resp.Body.Close()
		if n != len(benchMsg) || resp.Trailer.Get("Grpc-Status") != "0" {
			b.Fatalf("got %d bytes, trailer %v", n, resp.Trailer)
		}
	}
}

// BenchmarkUnary: unary echo over loopback TCP to grpc-go with a Conn.
func BenchmarkUnary(b *testing.B) {
	ts := startServer(b)
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		b.Fatal(err)
	}
	cc, err := New(context.Background(), nc, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	benchUnary(b, cc, ts.addr)
}

// BenchmarkUnaryNetHTTP: the same with net/http's HTTP/2 client connection.
func BenchmarkUnaryNetHTTP(b *testing.B) {
	ts := startServer(b)
	protos := new(http.Protocols)
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: protos, DialContext: func(context.Context, string, string) (net.Conn, error) {
		return net.Dial("tcp", ts.addr)
	}}
	cc, err := tr.NewClientConn(context.Background(), "http", "machine:80")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	benchUnary(b, cc, ts.addr)
}
