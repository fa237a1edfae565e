package tunnel

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Serve runs one forwarded call from stream against h (the agent's
// grpc.Server, through its ServeHTTP) and closes the stream when done.
func Serve(ctx context.Context, stream io.ReadWriteCloser, h http.Handler, remote string) error {
	defer stream.Close()
	fr := NewFrameReader(stream)
	first, err := fr.Read()
	if err != nil {
		return fmt.Errorf("read call headers: %w", err)
	}
	return serveCall(ctx, stream, fr, first, h, remote)
}

// serveCall runs a call whose first frame has been read from fr.
func serveCall(ctx context.Context, stream io.ReadWriteCloser, fr *FrameReader, first *pb.TunnelFrame, h http.Handler, remote string) error {
	md := first.GetMetadata()
	if md == nil || md.Trailers || first.ServiceName == "" || first.MethodName == "" {
		return errors.New("call did not start with a request header frame")
	}
	hdr := make(http.Header, len(md.Entries))
	for _, e := range md.Entries {
		hdr[textproto.CanonicalMIMEHeaderKey(e.Key)] = e.Values
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	body, bodyW := io.Pipe()
	req := (&http.Request{
		Method:        http.MethodPost,
		URL:           &url.URL{Path: "/" + first.ServiceName + "/" + first.MethodName},
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        hdr,
		Body:          body,
		ContentLength: -1,
		RemoteAddr:    remote,
		RequestURI:    "/" + first.ServiceName + "/" + first.MethodName,
		Host:          "betcode-relay",
	}).WithContext(ctx)

	// Frames from the relay: body bytes, half-close, cancel.
	go func() {
		for {
			f, err := fr.Read()
			if err != nil {
				bodyW.CloseWithError(io.ErrUnexpectedEOF)
				cancel()
				return
			}
			switch pl := f.Payload.(type) {
			case *pb.TunnelFrame_Stream:
				if len(pl.Stream.Data) > 0 {
					if _, err := bodyW.Write(pl.Stream.Data); err != nil {
						cancel()
						return
					}
				}
				if pl.Stream.EndOfStream {
					bodyW.Close()
				}
			case *pb.TunnelFrame_Error:
				bodyW.CloseWithError(context.Canceled)
				cancel()
				return
			}
		}
	}()

	rw := &responseWriter{fw: NewFrameWriter(stream), header: http.Header{}, onError: cancel}
	rw.idle = sync.NewCond(&rw.mu)
	h.ServeHTTP(rw, req)
	return rw.finish()
}

// responseWriter turns what grpc-go's ServeHTTP writes into frames.
type responseWriter struct {
	mu        sync.Mutex
	fw        *FrameWriter
	header    http.Header
	sent      http.Header // header snapshot at WriteHeader
	status    int
	buf       bytes.Buffer
	err       error
	onError   func()
	head      *pb.TunnelFrame // response headers not yet sent
	flushing  bool            // a goroutine is sending buf
	finishing bool            // the handler returned: finish sends the rest
	idle      *sync.Cond      // on mu: flushing ended or buf drained
}

func (rw *responseWriter) Header() http.Header { return rw.header }

func (rw *responseWriter) WriteHeader(code int) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.writeHeaderLocked(code)
}

func (rw *responseWriter) writeHeaderLocked(code int) {
	if rw.sent != nil {
		return
	}
	rw.status = code
	rw.sent = rw.header.Clone()
	h := rw.sent.Clone()
	delete(h, "Trailer")
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			delete(h, k)
		}
	}
	// Held back to leave with the first body bytes or the trailers.
	rw.head = Metadata(h, false)
}

// takeHead returns the response headers if they have not been sent.
func (rw *responseWriter) takeHead() *pb.TunnelFrame {
	h := rw.head
	rw.head = nil
	return h
}

func (rw *responseWriter) send(f ...*pb.TunnelFrame) {
	if rw.err != nil {
		return
	}
	if err := rw.fw.Write(f...); err != nil {
		rw.err = err
		rw.onError() // the relay is gone: end the handler
	}
}

func (rw *responseWriter) Write(b []byte) (int, error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.writeHeaderLocked(http.StatusOK)
	if rw.err != nil {
		return 0, rw.err
	}
	for rw.flushing && rw.buf.Len() >= 4*ChunkBytes && rw.err == nil {
		rw.idle.Wait()
	}
	rw.buf.Write(b)
	if rw.buf.Len() >= ChunkBytes {
		rw.flushLocked()
	}
	return len(b), rw.err
}

// Flush sends buffered body bytes as one data frame.
func (rw *responseWriter) Flush() {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.writeHeaderLocked(http.StatusOK)
	if rw.buf.Len() == 0 && !rw.flushing && rw.head != nil {
		rw.send(rw.takeHead()) // headers asked for on their own (SendHeader)
		return
	}
	rw.flushLocked()
}

func (rw *responseWriter) flushLocked() {
	if rw.buf.Len() == 0 || rw.flushing {
		return
	}
	rw.flushing = true
	go rw.flushLoop()
}

// flushLoop sends what accumulates in buf until it is empty: messages the
// handler writes while a frame is on its way leave together in the next.
func (rw *responseWriter) flushLoop() {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	for rw.buf.Len() > 0 && rw.err == nil && !rw.finishing {
		head := rw.takeHead()
		data := bytes.Clone(rw.buf.Bytes())
		rw.buf.Reset()
		rw.idle.Broadcast()
		rw.mu.Unlock()
		err := rw.fw.Write(head, DataFrame(data, false))
		rw.mu.Lock()
		if err != nil && rw.err == nil {
			rw.err = err
			rw.onError()
		}
	}
	rw.flushing = false
	rw.idle.Broadcast()
}

// drainLocked waits for the flushing goroutine, then sends the rest.
// The last bytes leave with the headers (if still held) and the trailers.
func (rw *responseWriter) drainLocked() (head, data *pb.TunnelFrame) {
	rw.finishing = true // a flush not started yet leaves its bytes to finish
	for rw.flushing {
		rw.idle.Wait()
	}
	head = rw.takeHead()
	if rw.buf.Len() > 0 {
		data = DataFrame(bytes.Clone(rw.buf.Bytes()), false)
		rw.buf.Reset()
	}
	return head, data
}

// finish sends the trailers: those declared in "Trailer" at WriteHeader and
// those set with http.TrailerPrefix.
func (rw *responseWriter) finish() error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.writeHeaderLocked(http.StatusOK)
	head, data := rw.drainLocked()
	tr := http.Header{}
	for _, names := range rw.sent["Trailer"] {
		for _, n := range strings.Split(names, ",") {
			n = textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(n))
			if v, ok := rw.header[n]; ok && n != "" {
				tr[n] = v
			}
		}
	}
	for k, v := range rw.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			tr[textproto.CanonicalMIMEHeaderKey(name)] = v
		}
	}
	if rw.status != http.StatusOK && tr.Get("Grpc-Status") == "" {
		tr.Set("Grpc-Status", fmt.Sprint(codeInternal))
		tr.Set("Grpc-Message", encodeGrpcMessage(fmt.Sprintf("agent answered HTTP %d", rw.status)))
	}
	rw.send(head, data, Metadata(tr, true))
	return rw.err
}

var _ http.Flusher = (*responseWriter)(nil)

// EncodeGrpcMessage percent-encodes a status message as gRPC requires for
// the grpc-message header or trailer.
func EncodeGrpcMessage(msg string) string { return encodeGrpcMessage(msg) }

func encodeGrpcMessage(msg string) string {
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func encodeBin(b []byte) string { return base64.RawStdEncoding.EncodeToString(b) }
