// Package grpcstream serves one streaming method of a gRPC service straight
// on an http.Handler (the relay's own HTTP/2 server, relay/internal/h2front),
// without grpc-go's transport: the method's handler runs on the goroutine
// the HTTP/2 server gives the request, reads the request body and writes
// the response itself, and holds no buffer between messages. An agent's
// tunnel (TunnelService.OpenTunnel, open for days and idle most of that
// time) then costs its connection one reader goroutine and this one,
// instead of grpc-go's four.
//
// Only what such a method needs is here: length-prefixed protobuf
// messages without compression, request metadata (with the peer's TLS
// state, as grpc-go gives it), response headers and trailers with the
// status and its details. Every other request goes to the next handler
// (a *grpc.Server's ServeHTTP serves the service's other methods).
package grpcstream

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/relay/internal/grpcerr"
)

// MaxRecvMsgSize bounds one received message, as grpc-go's default.
const MaxRecvMsgSize = 4 << 20

// Handler serves the streaming method at path (e.g.
// "/betcode.v1.TunnelService/OpenTunnel") with serve and passes every other
// request to next. serve's error is the call's status, unless it detached
// the call (ServerStream.Detach).
func Handler(path string, serve func(*ServerStream) error, next http.Handler) http.Handler {
	return &handler{path: path, serve: serve, next: next}
}

type handler struct {
	path  string
	serve func(*ServerStream) error
	next  http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != h.path {
		h.next.ServeHTTP(w, r)
		return
	}
	if r.ProtoMajor != 2 || r.Method != http.MethodPost {
		http.Error(w, "gRPC requires HTTP/2 POST", http.StatusBadRequest)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/grpc" && ct != "application/grpc+proto" {
		http.Error(w, "unsupported content-type "+ct, http.StatusUnsupportedMediaType)
		return
	}
	s := &ServerStream{w: w, body: r.Body, ctx: requestContext(r), sem: make(chan struct{}, 1)}
	var err error
	if enc := r.Header.Get("Grpc-Encoding"); enc != "" && enc != "identity" {
		err = status.Errorf(codes.Unimplemented, "grpcstream: compression %q is not supported", enc)
	} else {
		err = h.serve(s)
	}
	if s.detached {
		return // the holder of Detach's end finishes the call
	}
	if !s.finish(err) {
		// A send blocks on a peer that takes nothing: end the stream
		// with RST_STREAM (the HTTP/2 server's answer to an aborted
		// handler), which also fails that send.
		panic(http.ErrAbortHandler)
	}
}

// requestContext is r's context with its metadata and peer, as grpc-go's
// server gives a handler.
func requestContext(r *http.Request) context.Context {
	ctx := r.Context()
	md := make(metadata.MD, len(r.Header))
	for k, vv := range r.Header {
		k = strings.ToLower(k)
		if reserved(k) {
			continue
		}
		for _, v := range vv {
			if strings.HasSuffix(k, "-bin") {
				b, err := decodeBin(v)
				if err != nil {
					continue // grpc-go drops an undecodable binary value too
				}
				v = string(b)
			}
			md[k] = append(md[k], v)
		}
	}
	ctx = metadata.NewIncomingContext(ctx, md)
	p := &peer.Peer{Addr: strAddr(r.RemoteAddr)}
	if la, ok := ctx.Value(http.LocalAddrContextKey).(net.Addr); ok {
		p.LocalAddr = la
	}
	if r.TLS != nil {
		p.AuthInfo = credentials.TLSInfo{State: *r.TLS, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}
	}
	return peer.NewContext(ctx, p)
}

// reserved reports the headers that are the transport's, not metadata.
func reserved(k string) bool {
	switch k {
	case "content-type", "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding",
		"grpc-message", "grpc-status", "grpc-status-details-bin", "grpc-message-type", "connection", "host":
		return true
	}
	return false
}

func decodeBin(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}

// strAddr is a remote address as the HTTP server gave it.
type strAddr string

func (a strAddr) Network() string { return "tcp" }
func (a strAddr) String() string  { return string(a) }

// msgBufs recycles the buffers messages are marshalled into and read
// into.
var msgBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxKeptMsgBuf is the largest message buffer given back to the pool.
const maxKeptMsgBuf = 256 << 10

// putMsgBuf gives pb back to msgBufs, unless it grew too large to keep.
func putMsgBuf(pb *[]byte) {
	if cap(*pb) <= maxKeptMsgBuf {
		*pb = (*pb)[:0]
		msgBufs.Put(pb)
	}
}

// Typed is a ServerStream as a bidirectional method's handler takes it
// (grpc.BidiStreamingServer[Req, Res]), keeping its Detach.
type Typed[Req, Res any] struct{ *ServerStream }

// Send sends m.
func (s Typed[Req, Res]) Send(m *Res) error { return s.SendMsg(m) }

// Recv reads the next message.
func (s Typed[Req, Res]) Recv() (*Req, error) {
	m := new(Req)
	if err := s.RecvMsg(m); err != nil {
		return nil, err
	}
	return m, nil
}

// finishWait bounds how long the end of a call waits for a send under way
// (one the peer does not take: its flow-control window is shut) before it
// resets the stream instead of sending the status.
const finishWait = time.Second

// ServerStream is one call of the method: a grpc.ServerStream over the
// HTTP/2 request and its response. SendMsg is safe to call from several
// goroutines (the calls are serialised); RecvMsg from one at a time.
type ServerStream struct {
	w    http.ResponseWriter
	body io.ReadCloser
	ctx  context.Context
	hdr  [5]byte // RecvMsg's message prefix

	// sem serialises writes and guards the fields below: a channel, not
	// a mutex, so that finish can give up on a send that the peer's flow
	// control holds forever.
	sem         chan struct{}
	detached    bool // Detach succeeded (the handler's goroutine only)
	wroteHeader bool
	done        bool // finish ran: no more messages
	header      metadata.MD
	trailer     metadata.MD
}

var _ grpc.ServerStream = (*ServerStream)(nil)

func (s *ServerStream) lock()   { s.sem <- struct{}{} }
func (s *ServerStream) unlock() { <-s.sem }

// Context returns the call's context: it ends when the request does.
func (s *ServerStream) Context() context.Context { return s.ctx }

// SetHeader adds md to the response headers, until they are sent.
func (s *ServerStream) SetHeader(md metadata.MD) error { return s.addHeader(md, false) }

// SendHeader sends the response headers with md added.
func (s *ServerStream) SendHeader(md metadata.MD) error { return s.addHeader(md, true) }

func (s *ServerStream) addHeader(md metadata.MD, send bool) error {
	s.lock()
	defer s.unlock()
	if s.wroteHeader {
		return status.Error(codes.Internal, "grpcstream: headers already sent")
	}
	s.header = metadata.Join(s.header, md)
	if !send {
		return nil
	}
	s.writeHeaderLocked()
	return s.flushLocked()
}

// SetTrailer adds md to the trailers sent when the handler returns.
func (s *ServerStream) SetTrailer(md metadata.MD) {
	s.lock()
	s.trailer = metadata.Join(s.trailer, md)
	s.unlock()
}

// SendMsg sends m (a proto.Message) and flushes it to the peer.
func (s *ServerStream) SendMsg(m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "grpcstream: %T is not a proto.Message", m)
	}
	pb := msgBufs.Get().(*[]byte)
	defer putMsgBuf(pb)
	b, err := proto.MarshalOptions{}.MarshalAppend(append((*pb)[:0], 0, 0, 0, 0, 0), msg)
	if err != nil {
		return status.Errorf(codes.Internal, "grpcstream: marshal %T: %v", m, err)
	}
	*pb = b
	binary.BigEndian.PutUint32(b[1:5], uint32(len(b)-5))
	s.lock()
	defer s.unlock()
	if s.done {
		return status.Error(codes.Internal, "grpcstream: SendMsg after the handler returned")
	}
	s.writeHeaderLocked()
	if _, err := s.w.Write(b); err != nil {
		return s.transportErr(err)
	}
	return s.flushLocked()
}

// RecvMsg reads the next message into m (a proto.Message). It returns
// io.EOF when the peer has ended its side cleanly, and a status error for
// a truncated, compressed, oversized or undecodable message.
func (s *ServerStream) RecvMsg(m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "grpcstream: %T is not a proto.Message", m)
	}
	if _, err := io.ReadFull(s.body, s.hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		return s.readErr(err, "message prefix")
	}
	switch s.hdr[0] {
	case 0:
	case 1:
		return status.Error(codes.Internal, "grpcstream: a compressed message, but no compression was negotiated")
	default:
		return status.Errorf(codes.Internal, "grpcstream: message flag %#x is neither 0 nor 1", s.hdr[0])
	}
	n := binary.BigEndian.Uint32(s.hdr[1:])
	if n > MaxRecvMsgSize {
		return status.Errorf(codes.ResourceExhausted, "grpcstream: received message larger than max (%d vs. %d)", n, MaxRecvMsgSize)
	}
	pb := msgBufs.Get().(*[]byte)
	defer putMsgBuf(pb)
	if cap(*pb) < int(n) {
		*pb = make([]byte, n)
	}
	buf := (*pb)[:n]
	if _, err := io.ReadFull(s.body, buf); err != nil {
		return s.readErr(err, "message")
	}
	// proto.Unmarshal copies what it keeps: buf goes back to the pool.
	if err := proto.Unmarshal(buf, msg); err != nil {
		return status.Errorf(codes.Internal, "grpcstream: unmarshal %T: %v", m, err)
	}
	return nil
}

// readErr is the status of a failed read of what.
func (s *ServerStream) readErr(err error, what string) error {
	if cerr := s.ctx.Err(); cerr != nil {
		return status.FromContextError(cerr).Err()
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return status.Errorf(codes.Internal, "grpcstream: the request ended inside a %s", what)
	}
	return status.Errorf(codes.Unavailable, "grpcstream: read %s: %v", what, err)
}

// transportErr is the status of a failed write.
func (s *ServerStream) transportErr(err error) error {
	if cerr := s.ctx.Err(); cerr != nil {
		return status.FromContextError(cerr).Err()
	}
	return status.Errorf(codes.Unavailable, "grpcstream: write: %v", err)
}

func (s *ServerStream) flushLocked() error {
	var err error
	switch f := s.w.(type) {
	case interface{ FlushError() error }:
		err = f.FlushError()
	case http.Flusher:
		f.Flush()
	}
	if err != nil {
		return s.transportErr(err)
	}
	return nil
}

// writeHeaderLocked sends the response headers, once.
func (s *ServerStream) writeHeaderLocked() {
	if s.wroteHeader {
		return
	}
	s.wroteHeader = true
	h := s.w.Header()
	h.Set("Content-Type", "application/grpc")
	addMD(h, "", s.header)
	s.w.WriteHeader(http.StatusOK)
}

// Detach lets serve return while the call goes on: end(err) finishes it
// later with err's status (once; later calls do nothing), from any
// goroutine. Until then the stream's sends and receives work as before.
// The holder must call end at the latest once Context is done. ok is
// false (and the call ends when serve returns, as usual) when the HTTP
// server cannot detach a request (only h2front can). Call it from serve.
func (s *ServerStream) Detach() (end func(error), ok bool) {
	d, ok := s.w.(interface{ Detach() func(reset bool) })
	if !ok {
		return nil, false
	}
	finish := d.Detach()
	s.detached = true
	var once sync.Once
	return func(err error) {
		once.Do(func() { finish(!s.finish(err)) })
	}, true
}

// finish ends the call with err's status: in the trailers, or, if nothing
// was sent yet, in the headers alone (a trailers-only response). It
// reports false, having written nothing, when a send under way holds the
// stream for finishWait: the caller then resets the stream.
func (s *ServerStream) finish(err error) bool {
	st := status.Convert(err)
	select {
	case s.sem <- struct{}{}:
	case <-time.After(finishWait):
		return false
	}
	defer s.unlock()
	s.done = true
	if s.wroteHeader {
		addMD(s.w.Header(), http.TrailerPrefix, s.trailer)
		grpcerr.WriteTrailers(s.w, st)
		return true
	}
	s.wroteHeader = true
	addMD(s.w.Header(), "", s.header)
	addMD(s.w.Header(), "", s.trailer)
	grpcerr.End(s.w, st)
	return true
}

// addMD adds md to h under prefix, binary values base64-encoded.
func addMD(h http.Header, prefix string, md metadata.MD) {
	for k, vv := range md {
		if reserved(k) || strings.HasPrefix(k, ":") {
			continue
		}
		for _, v := range vv {
			if strings.HasSuffix(k, "-bin") {
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			h.Add(prefix+k, v)
		}
	}
}
