package h2front

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
)

func benchUnary(b *testing.B, addr string) {
	cc := dialGRPC(b, addr)
	ctx := context.Background()
	msg := []byte("benchmark payload")
	if _, err := unaryCall(ctx, cc, msg); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := unaryCall(ctx, cc, msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnary: grpc-go client → Server (TLS, loopback) →
// (*grpc.Server).ServeHTTP.
func BenchmarkUnary(b *testing.B) {
	ts := startServer(b, newGRPCServer(b, newEchoService()), nil)
	benchUnary(b, ts.addr)
}

// BenchmarkUnaryNetHTTP: the same behind net/http's HTTP/2 server.
func BenchmarkUnaryNetHTTP(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{
		Handler:   newGRPCServer(b, newEchoService()),
		TLSConfig: serverTLS(),
		HTTP2:     &http.HTTP2Config{MaxConcurrentStreams: 1000},
	}
	done := make(chan error, 1)
	go func() { done <- hs.ServeTLS(ln, "", "") }()
	b.Cleanup(func() {
		_ = hs.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			b.Errorf("ServeTLS: %v", err)
		}
	})
	benchUnary(b, ln.Addr().String())
}
