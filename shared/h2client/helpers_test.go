package h2client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rawCodec passes gRPC messages as raw bytes (*[]byte).
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

// testServer is a grpc-go server with generic handlers, keyed by method.
type testServer struct {
	addr string
	srv  *grpc.Server
	// events from handlers (e.g. "block: ctx done")
	events chan string
	// release lets the /t/Hold handler answer.
	release chan struct{}
}

func startServer(t testing.TB) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{addr: ln.Addr().String(), events: make(chan string, 100), release: make(chan struct{})}
	ts.srv = grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(ts.handle))
	done := make(chan struct{})
	go func() { defer close(done); ts.srv.Serve(ln) }()
	t.Cleanup(func() { ts.srv.Stop(); <-done })
	return ts
}

func (ts *testServer) event(e string) {
	select {
	case ts.events <- e:
	default:
	}
}

func (ts *testServer) handle(_ any, st grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(st)
	ctx := st.Context()
	switch method {
	case "/t/Echo": // echo every message until the client half-closes
		for {
			var m []byte
			if err := st.RecvMsg(&m); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			if err := st.SendMsg(&m); err != nil {
				return err
			}
		}
	case "/t/Download": // request: 8-byte total size; answer: 16 KiB messages
		var m []byte
		if err := st.RecvMsg(&m); err != nil {
			return err
		}
		total := int(binary.BigEndian.Uint64(m))
		for off := 0; off < total; off += 16 << 10 {
			msg := pattern(off, min(16<<10, total-off))
			if err := st.SendMsg(&msg); err != nil {
				return err
			}
		}
		return nil
	case "/t/Upload": // answer: 8-byte count + sha256 of all message bytes
		h := sha256.New()
		n := 0
		for {
			var m []byte
			if err := st.RecvMsg(&m); err == io.EOF {
				break
			} else if err != nil {
				return err
			}
			h.Write(m)
			n += len(m)
		}
		out := binary.BigEndian.AppendUint64(nil, uint64(n))
		out = h.Sum(out)
		return st.SendMsg(&out)
	case "/t/NotFound":
		return status.Error(codes.NotFound, "x")
	case "/t/Block": // block until the stream's context ends
		<-ctx.Done()
		ts.event("block: " + ctx.Err().Error())
		return status.FromContextError(ctx.Err()).Err()
	case "/t/Stream": // send one message, then block until ctx ends
		m := []byte("first")
		if err := st.SendMsg(&m); err != nil {
			return err
		}
		<-ctx.Done()
		ts.event("stream: " + ctx.Err().Error())
		return ctx.Err()
	}
	return status.Error(codes.Unimplemented, method)
}

// pattern returns n deterministic bytes for offset off of a download.
func pattern(off, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((off + i) * 7 >> 3)
	}
	return b
}

// frame frames msg as one gRPC message.
func frame(msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// readMsg reads one gRPC message.
func readMsg(r io.Reader) ([]byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(h[1:]))
	_, err := io.ReadFull(r, b)
	return b, err
}

// bufBody is a request body whose bytes are all available: it implements
// Buffered.
type bufBody struct {
	bytes.Reader
}

func newBufBody(b []byte) *bufBody {
	bb := &bufBody{}
	bb.Reset(b)
	return bb
}

func (b *bufBody) Buffered() (int, bool) { return b.Len(), true }
func (b *bufBody) Close() error          { return nil }

// closeFlag announces that a request body was closed.
type closeFlag struct {
	io.ReadCloser
	closed chan struct{}
	once   sync.Once
}

func newCloseFlag(rc io.ReadCloser) *closeFlag {
	return &closeFlag{ReadCloser: rc, closed: make(chan struct{})}
}

func (c *closeFlag) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.ReadCloser.Close()
}

// waitClosed waits up to 5 s for the body to be closed.
func (c *closeFlag) waitClosed(t testing.TB) {
	t.Helper()
	select {
	case <-c.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the request body was not closed")
	}
}

// countConn counts and records the writes to a net.Conn.
type countConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *countConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, append([]byte(nil), p...))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *countConn) takeWrites() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.writes
	c.writes = nil
	return w
}

// dial connects a Conn to addr; it is closed at cleanup.
func dial(t testing.TB, addr string, o Options) (*Conn, *countConn) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &countConn{Conn: nc}
	cc, err := New(context.Background(), c, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc, c
}

// grpcReq builds a gRPC request for method with body.
func grpcReq(ctx context.Context, addr, method string, body io.Reader) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+method, body)
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	return req
}

// grpcStatus returns the call's grpc-status from the trailers, or from the
// headers for a trailers-only answer.
func grpcStatus(resp *http.Response) string {
	if s := resp.Trailer.Get("Grpc-Status"); s != "" {
		return s
	}
	return resp.Header.Get("Grpc-Status")
}

// unary makes one unary call of method with msg and returns the answer.
func unary(cc http.RoundTripper, addr, method string, msg []byte) ([]byte, error) {
	req := grpcReq(context.Background(), addr, method, newBufBody(frame(msg)))
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if st := grpcStatus(resp); st != "0" {
		return nil, fmt.Errorf("grpc-status %q: %s", st, resp.Trailer.Get("Grpc-Message"))
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	return readMsg(bytes.NewReader(b))
}

// waitFor checks cond, a state of the Conn that no event announces, on a
// ticker until it holds, failing t after a deadline.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// waitEvent waits for a server handler event starting with prefix.
func waitEvent(t testing.TB, ts *testServer, prefix string) string {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case e := <-ts.events:
			if strings.HasPrefix(e, prefix) {
				return e
			}
		case <-timeout:
			t.Fatalf("no server event %q", prefix)
			return ""
		}
	}
}

func isStreamReset(err error, code string) bool {
	var se *StreamError
	return errors.As(err, &se) && se.Code.String() == code
}

// startAnswering starts a raw server that answers each request's HEADERS
// with response headers and data, then trailers if end; it reads and drops
// everything else.
func startAnswering(t testing.TB, data []byte, end bool) string {
	t.Helper()
	return startRaw(t, func(rc *rawConn) {
		rc.drain(func(f http2.Frame) {
			if f, ok := f.(*http2.MetaHeadersFrame); ok {
				rc.writeHeaders(f.StreamID, false, ":status", "200", "content-type", "application/grpc")
				rc.fr.WriteData(f.StreamID, false, data)
				if end {
					rc.writeHeaders(f.StreamID, true, "grpc-status", "0")
				}
			}
		})
	})
}

// liveHeap is the heap's live bytes: after two collections (the second
// also frees what sync.Pool's victim cache held).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
