package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/h2client"
)

// Status codes written when the tunnel itself fails (grpc codes).
const (
	codeCanceled         = 1
	codeDeadlineExceeded = 4
	codeInternal         = 13
	codeUnavailable      = 14
)

// droppedRequestHeaders never cross the tunnel: hop-by-hop headers and the
// client's credentials for the relay.
var droppedRequestHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Transfer-Encoding": true,
	"Upgrade": true, "Host": true, "Authorization": true, "Cookie": true, "Te": true,
}

// SplitMethod splits "/pkg.Service/Method" into its service and method.
func SplitMethod(path string) (service, method string, ok bool) {
	path = strings.TrimPrefix(path, "/")
	i := strings.LastIndexByte(path, '/')
	if i <= 0 || i == len(path)-1 {
		return "", "", false
	}
	return path[:i], path[i+1:], true
}

// callHeaders is the metadata a forwarded call carries: the client's
// headers without the hop-by-hop ones and its credentials for the relay,
// plus headers (which override the client's values of those keys).
func callHeaders(r *http.Request, headers http.Header) http.Header {
	md := make(http.Header, len(r.Header)+len(headers))
	for k, v := range r.Header {
		if !droppedRequestHeaders[k] {
			md[k] = v
		}
	}
	for k, v := range headers {
		md[textproto.CanonicalMIMEHeaderKey(k)] = v
	}
	return md
}

// writeTunnelFailed answers a call that could not be sent to the machine.
func writeTunnelFailed(w http.ResponseWriter, err error) {
	WriteStatus(w, codeUnavailable, "machine tunnel failed: "+err.Error(), tunnelDisconnected(codeUnavailable, "machine tunnel failed"))
}

// Forward carries one client call over stream (a new yamux stream to the
// agent) and writes the agent's answer to w. headers are added to the
// request's metadata (overriding the client's own values of those keys). It
// returns when the call is over; the stream is closed.
func Forward(ctx context.Context, stream io.ReadWriteCloser, w http.ResponseWriter, r *http.Request, requestID string, headers http.Header) error {
	defer stream.Close()
	service, method, ok := SplitMethod(r.URL.Path)
	if !ok {
		WriteStatus(w, 12, "malformed method path "+r.URL.Path, nil)
		return fmt.Errorf("malformed method %q", r.URL.Path)
	}
	md := callHeaders(r, headers)
	var wmu sync.Mutex
	fw := NewFrameWriter(stream)
	send := func(f *pb.TunnelFrame) error {
		wmu.Lock()
		defer wmu.Unlock()
		return fw.Write(f)
	}
	first := Metadata(md, false)
	first.RequestId, first.ServiceName, first.MethodName = requestID, service, method
	if err := send(first); err != nil {
		writeTunnelFailed(w, err)
		return err
	}

	callDone := make(chan struct{})
	defer close(callDone)
	// Request body → data frames.
	go func() {
		cr := newChunkReader(r.Body)
		defer cr.close()
		for {
			chunk, _, err := cr.read()
			if len(chunk) > 0 {
				if send(DataFrame(chunk, false)) != nil {
					return
				}
			}
			if err == io.EOF { // the client's end; a wrapped EOF is a failure
				_ = send(DataFrame(nil, true))
				return
			}
			if err != nil {
				return // the client went away; ctx ends too
			}
		}
	}()
	// The client cancelling abandons the call on the agent.
	go func() {
		select {
		case <-ctx.Done():
			_ = send(CancelFrame(ctx.Err().Error()))
			stream.Close()
		case <-callDone:
		}
	}()

	fr := NewFrameReader(stream)
	flusher, _ := w.(http.Flusher)
	wroteHeader := false
	for {
		f, err := fr.Read()
		if err != nil {
			msg := "machine tunnel disconnected during the call"
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !wroteHeader {
				WriteStatus(w, codeUnavailable, msg, tunnelDisconnected(codeUnavailable, msg))
			} else {
				setTrailer(w, "Grpc-Status", strconv.Itoa(codeUnavailable))
				setTrailer(w, "Grpc-Message", msg)
				setTrailer(w, "Grpc-Status-Details-Bin", encodeBin(tunnelDisconnected(codeUnavailable, msg)))
			}
			return fmt.Errorf("read from tunnel: %w", err)
		}
		switch pl := f.Payload.(type) {
		case *pb.TunnelFrame_Metadata:
			if !pl.Metadata.Trailers {
				h := w.Header()
				for _, e := range pl.Metadata.Entries {
					h[textproto.CanonicalMIMEHeaderKey(e.Key)] = e.Values
				}
				// A gRPC response always names its content type; headers
				// without it (a handler that ended before writing any)
				// would make the client fail the call as malformed instead
				// of reading the status the trailers carry.
				if h.Get("Content-Type") == "" {
					h.Set("Content-Type", "application/grpc")
				}
				w.WriteHeader(http.StatusOK)
				wroteHeader = true
				// Headers with nothing behind them yet go out now (a
				// stream resumed on an idle session).
				if flusher != nil && fr.r.Buffered() == 0 {
					flusher.Flush()
				}
				continue
			}
			if !wroteHeader {
				w.Header().Set("Content-Type", "application/grpc")
				w.WriteHeader(http.StatusOK)
			}
			for _, e := range pl.Metadata.Entries {
				for _, v := range e.Values {
					w.Header().Add(http.TrailerPrefix+textproto.CanonicalMIMEHeaderKey(e.Key), v)
				}
			}
			return nil
		case *pb.TunnelFrame_Stream:
			if len(pl.Stream.Data) > 0 {
				if !wroteHeader {
					w.Header().Set("Content-Type", "application/grpc")
					w.WriteHeader(http.StatusOK)
					wroteHeader = true
				}
				if _, err := w.Write(pl.Stream.Data); err != nil {
					return fmt.Errorf("write to client: %w", err)
				}
				// Flush only when no further frame is already here: a burst
				// of small messages leaves in one write to the client.
				if flusher != nil && fr.r.Buffered() == 0 {
					flusher.Flush()
				}
			}
		case *pb.TunnelFrame_Error:
			if !wroteHeader {
				WriteStatus(w, codeUnavailable, "machine ended the call: "+pl.Error.Message, tunnelDisconnected(codeUnavailable, pl.Error.Message))
			}
			return errors.New("agent ended the call: " + pl.Error.Message)
		}
	}
}

// bodyBufs recycles the request-body read buffers: a fresh 64 KiB per
// call made the relay's garbage collector run every few dozen calls.
var bodyBufs = sync.Pool{New: func() any { b := make([]byte, ChunkBytes); return &b }}

// quietChunk is the buffer a chunkReader waits on: big enough for a
// typical event, small enough that thousands of open, quiet streams (a
// browser following a session, a client's side of Converse, an idle
// end-to-end channel) do not each hold much while they wait. A body that
// says it holds more (h2client.Buffered) is read with a ChunkBytes buffer
// at once.
const quietChunk = 512

// quietBufs recycles the quietChunk buffers: a unary call used to leave
// one behind as garbage, the largest single allocation of a relayed call.
var quietBufs = sync.Pool{New: func() any { b := make([]byte, quietChunk); return &b }}

// chunkReader reads a body in chunks of up to ChunkBytes. It waits for
// data with a small buffer (from quietBufs, held until close) and takes a
// ChunkBytes one from bodyBufs only when a read filled the small one (more
// was waiting); it gives that back once a read comes back short (nothing
// more was waiting), before it waits again.
type chunkReader struct {
	r       io.Reader
	small   *[]byte
	big     *[]byte
	release bool // the last read with big came back short
}

func newChunkReader(r io.Reader) *chunkReader {
	return &chunkReader{r: r, small: quietBufs.Get().(*[]byte)}
}

// read returns the next chunk, valid until the next call; full says it
// filled its buffer (more is likely waiting).
func (c *chunkReader) read() (chunk []byte, full bool, err error) {
	if c.release {
		bodyBufs.Put(c.big)
		c.big, c.release = nil, false
	}
	buf := *c.small
	if c.big != nil {
		buf = *c.big
	} else if bb, ok := c.r.(h2client.Buffered); ok {
		if n, _ := bb.Buffered(); n > len(buf) {
			c.big = bodyBufs.Get().(*[]byte)
			buf = *c.big
		}
	}
	n, err := c.r.Read(buf)
	full = n == len(buf)
	switch {
	case c.big == nil && full:
		c.big = bodyBufs.Get().(*[]byte)
	case c.big != nil && !full:
		c.release = true
	}
	return buf[:n], full, err
}

// reopen takes a small buffer again after close.
func (c *chunkReader) reopen() {
	if c.small == nil {
		c.small = quietBufs.Get().(*[]byte)
	}
}

// close gives back the buffers; the last chunk read is no longer valid.
func (c *chunkReader) close() {
	if c.big != nil {
		bodyBufs.Put(c.big)
		c.big = nil
	}
	c.release = false
	if c.small != nil {
		quietBufs.Put(c.small)
		c.small = nil
	}
}

func setTrailer(w http.ResponseWriter, k, v string) {
	w.Header().Set(http.TrailerPrefix+k, v)
}

// WriteStatus answers a gRPC call with only a status (a trailers-only
// response). details, if set, is the binary google.rpc.Status.
func WriteStatus(w http.ResponseWriter, code int, msg string, details []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/grpc")
	h.Set("Grpc-Status", strconv.Itoa(code))
	if msg != "" {
		h.Set("Grpc-Message", encodeGrpcMessage(msg))
	}
	if len(details) > 0 {
		h.Set("Grpc-Status-Details-Bin", encodeBin(details))
	}
	w.WriteHeader(http.StatusOK)
}

// tunnelDisconnected is the google.rpc.Status detail of a call the tunnel
// dropped: ErrorInfo{reason: TUNNEL_DISCONNECTED, domain: betcode.dev}.
func tunnelDisconnected(code int, msg string) []byte {
	info, _ := anypb.New(&errdetails.ErrorInfo{Reason: "TUNNEL_DISCONNECTED", Domain: "betcode.dev"})
	b, _ := proto.Marshal(&spb.Status{Code: int32(code), Message: msg, Details: []*anypb.Any{info}})
	return b
}
