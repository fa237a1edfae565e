package h2front

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

const (
	svcName    = "h2front.test.Echo"
	unaryPath  = "/" + svcName + "/Unary"
	chunk      = 16 << 10
	bigPayload = 20 << 20
)

// echoService implements the hand-written test service.
type echoService struct {
	started   chan struct{} // a "hang" handler started
	cancelled chan struct{} // a "hang" handler's context ended
}

func newEchoService() *echoService {
	return &echoService{started: make(chan struct{}, 16), cancelled: make(chan struct{}, 16)}
}

func (s *echoService) unary(ctx context.Context, in []byte) ([]byte, error) {
	switch string(in) {
	case "notfound":
		return nil, status.Error(codes.NotFound, "x")
	case "sleep":
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return in, nil
}

var echoDesc = grpc.ServiceDesc{
	ServiceName: svcName,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Unary",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			out, err := srv.(*echoService).unary(ctx, in)
			if err != nil {
				return nil, err
			}
			return &out, nil
		},
	}},
	Streams: []grpc.StreamDesc{
		{StreamName: "Download", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			var in []byte
			if err := ss.RecvMsg(&in); err != nil {
				return err
			}
			total, err := strconv.Atoi(string(in))
			if err != nil {
				return status.Error(codes.InvalidArgument, "size")
			}
			msg := bytes.Repeat([]byte{'d'}, chunk)
			for sent := 0; sent < total; sent += chunk {
				if err := ss.SendMsg(&msg); err != nil {
					return err
				}
			}
			return nil
		}},
		{StreamName: "Upload", ClientStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			total := 0
			for {
				var in []byte
				err := ss.RecvMsg(&in)
				if errors.Is(err, io.EOF) {
					out := []byte(strconv.Itoa(total))
					return ss.SendMsg(&out)
				}
				if err != nil {
					return err
				}
				total += len(in)
			}
		}},
		{StreamName: "Bidi", ServerStreams: true, ClientStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			for {
				var in []byte
				err := ss.RecvMsg(&in)
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				if err := ss.SendMsg(&in); err != nil {
					return err
				}
			}
		}},
		{StreamName: "Hang", ServerStreams: true, ClientStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			s := srv.(*echoService)
			s.started <- struct{}{}
			<-ss.Context().Done()
			s.cancelled <- struct{}{}
			return ss.Context().Err()
		}},
	},
}

// newGRPCServer returns a grpc.Server (served through ServeHTTP) with the
// echo service.
func newGRPCServer(t testing.TB, svc *echoService) *grpc.Server {
	gs := grpc.NewServer(grpc.ForceServerCodec(bytesCodec{}))
	gs.RegisterService(&echoDesc, svc)
	t.Cleanup(gs.Stop)
	return gs
}

// startGRPC starts a Server running the echo service and a client for it.
func startGRPC(t testing.TB, tweak func(*Server)) (*testServer, *echoService, *grpc.ClientConn) {
	svc := newEchoService()
	ts := startServer(t, newGRPCServer(t, svc), tweak)
	return ts, svc, dialGRPC(t, ts.addr)
}

func unaryCall(ctx context.Context, cc *grpc.ClientConn, msg []byte) ([]byte, error) {
	var out []byte
	err := cc.Invoke(ctx, unaryPath, &msg, &out)
	return out, err
}

func TestGRPCUnarySequential(t *testing.T) {
	leakcheck.Goroutines(t)
	_, _, cc := startGRPC(t, nil)
	ctx := withTimeout(t, 30*time.Second)
	for i := range 1000 {
		msg := []byte(fmt.Sprintf("hello %d", i))
		out, err := unaryCall(ctx, cc, msg)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if !bytes.Equal(out, msg) {
			t.Fatalf("call %d: got %q", i, out)
		}
	}
}

func TestGRPCUnaryConcurrent(t *testing.T) {
	leakcheck.Goroutines(t)
	_, _, cc := startGRPC(t, nil)
	ctx := withTimeout(t, 30*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for g := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				msg := []byte(fmt.Sprintf("g%d-%d", g, i))
				out, err := unaryCall(ctx, cc, msg)
				if err == nil && !bytes.Equal(out, msg) {
					err = fmt.Errorf("got %q want %q", out, msg)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestGRPCServerStreaming(t *testing.T) {
	leakcheck.Goroutines(t)
	_, _, cc := startGRPC(t, nil)
	ctx := withTimeout(t, 30*time.Second)
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/"+svcName+"/Download")
	if err != nil {
		t.Fatal(err)
	}
	req := []byte(strconv.Itoa(bigPayload))
	if err := cs.SendMsg(&req); err != nil {
		t.Fatal(err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		var m []byte
		err := cs.RecvMsg(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", got, err)
		}
		got += len(m)
	}
	if got != bigPayload {
		t.Fatalf("got %d bytes, want %d", got, bigPayload)
	}
}

func TestGRPCClientStreaming(t *testing.T) {
	leakcheck.Goroutines(t)
	_, _, cc := startGRPC(t, nil)
	ctx := withTimeout(t, 30*time.Second)
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, "/"+svcName+"/Upload")
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte{'u'}, chunk)
	for sent := 0; sent < bigPayload; sent += chunk {
		if err := cs.SendMsg(&msg); err != nil {
			t.Fatalf("send at %d: %v", sent, err)
		}
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var out []byte
	if err := cs.RecvMsg(&out); err != nil {
		t.Fatal(err)
	}
	if string(out) != strconv.Itoa(bigPayload) {
		t.Fatalf("server counted %s bytes", out)
	}
}

func TestGRPCBidi(t *testing.T) {
	leakcheck.Goroutines(t)
	_, _, cc := startGRPC(t, nil)
	ctx := withTimeout(t, 30*time.Second)
	bidiRounds(t, ctx, cc, 100)
}

// bidiRounds runs n ping-pong rounds on a new Bidi stream and closes it.
func bidiRounds(t testing.TB, ctx context.Context, cc *grpc.ClientConn, n int) {
	t.Helper()
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/"+svcName+"/Bidi")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		msg := []byte(fmt.Sprintf("round %d", i))
		if err := cs.SendMsg(&msg); err != nil {
			t.Fatal(err)
		}
		var out []byte
		if err := cs.RecvMsg(&out); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, msg) {
			t.Fatalf("round %d: got %q", i, out)
		}
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var out []byte
	if err := cs.RecvMsg(&out); !errors.Is(err, io.EOF) {
		t.Fatalf("end of bidi: %v", err)
	}
}

func TestGRPCStatusError(t *testing.T) {
	leakcheck.Goroutines(t)
	_, _, cc := startGRPC(t, nil)
	_, err := unaryCall(withTimeout(t, 10*time.Second), cc, []byte("notfound"))
	if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != "x" {
		t.Fatalf("got %v", err)
	}
}

func TestGRPCClientCancel(t *testing.T) {
	leakcheck.Goroutines(t)
	_, svc, cc := startGRPC(t, nil)
	ctx, cancel := context.WithCancel(withTimeout(t, 10*time.Second))
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/"+svcName+"/Hang")
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("x")
	_ = cs.SendMsg(&msg)
	<-svc.started
	cancel()
	select {
	case <-svc.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("handler context not cancelled")
	}
	var out []byte
	if err := cs.RecvMsg(&out); status.Code(err) != codes.Canceled {
		t.Fatalf("client got %v", err)
	}
}

func TestGRPCDeadline(t *testing.T) {
	leakcheck.Goroutines(t)
	_, _, cc := startGRPC(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := unaryCall(ctx, cc, []byte("sleep"))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("got %v", err)
	}
	// The connection still serves.
	if _, err := unaryCall(withTimeout(t, 10*time.Second), cc, []byte("after")); err != nil {
		t.Fatal(err)
	}
}
