package server

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// grpcFront serves gRPC clients on grpc-go's native transport and hands
// every call to the same http.Handler chain (authentication, limits, the
// router) that net/http serves browsers and other callers with: the call
// becomes an http.Request whose body is the call's request messages, framed
// as on the wire, and an http.ResponseWriter that sends each complete
// framed message the handler writes as one message and turns the handler's
// grpc-status headers or trailers into the call's status.
//
// Why: net/http's HTTP/2 server writes response headers, trailers and
// flushes each from a goroutine of its own and hands every frame between
// its connection goroutine and the handler; grpc-go's transport queues a
// unary answer's headers, message and trailers to one writer that sends
// them in one flush. That difference is most of what a relayed unary call
// cost over a direct one (docs/benchmarks-relay.md).
type grpcFront struct {
	h http.Handler
}

// newGRPCFront returns the grpc.Server for gRPC clients' connections (TLS
// already done by the splitter), every call handed to h. connCtx is run
// once per connection, as net/http's ConnContext hook would be: the
// context values it adds (relay/auth's per-connection state) are seen by
// every call of the connection.
func newGRPCFront(h http.Handler, connCtx func(context.Context, net.Conn) context.Context) *grpc.Server {
	f := &grpcFront{h: h}
	return grpc.NewServer(grpc.Creds(frontCreds{connCtx: connCtx}),
		grpc.UnknownServiceHandler(f.handle),
		grpc.ForceServerCodecV2(rawCodec{}),
		// The router bounds request messages itself (MESSAGE_TOO_LARGE,
		// --max-message-bytes); grpc-go's own bound is only a backstop.
		grpc.MaxRecvMsgSize(1<<30), grpc.MaxSendMsgSize(1<<30),
		grpc.MaxConcurrentStreams(1000),
		// Static windows, as the tunnel's ends have: no BDP pings.
		grpc.InitialWindowSize(1<<20), grpc.InitialConnWindowSize(4<<20),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))
}

// frontCreds are the front's transport credentials: the splitter did the
// TLS handshake; the connection's TLS state and its context (connCtx) go
// with every call as its peer's AuthInfo.
type frontCreds struct {
	connCtx func(context.Context, net.Conn) context.Context
}

// frontAuthInfo is a front connection's TLSInfo plus its context.
type frontAuthInfo struct {
	credentials.TLSInfo
	ctx context.Context
}

func (c frontCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	tc, ok := conn.(*tls.Conn)
	if !ok {
		return nil, nil, errors.New("relay: not a TLS connection")
	}
	ctx := context.Background()
	if c.connCtx != nil {
		ctx = c.connCtx(ctx, conn)
	}
	return conn, frontAuthInfo{
		TLSInfo: credentials.TLSInfo{State: tc.ConnectionState(), CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}},
		ctx:     ctx,
	}, nil
}

func (frontCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("relay: server-side credentials only")
}

func (frontCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (c frontCreds) Clone() credentials.TransportCredentials { return c }

func (frontCreds) OverrideServerName(string) error { return nil }

// connValues is a call's context that also sees its connection's values.
type connValues struct {
	context.Context
	conn context.Context
}

func (c connValues) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.conn.Value(key)
}

// frameMsg is one request or response message, already encoded: the front
// passes messages through without decoding them.
type frameMsg struct{ b []byte }

// rawCodec is the front's codec: messages stay bytes. Outgoing bytes are
// copied into a pooled buffer, because grpc-go writes them after SendMsg
// returns and the handler reuses its buffers.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(*frameMsg)
	if !ok {
		return nil, fmt.Errorf("relay front: cannot send %T", v)
	}
	if len(m.b) == 0 {
		return nil, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(len(m.b))
	copy(*buf, m.b)
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*frameMsg)
	if !ok {
		return fmt.Errorf("relay front: cannot receive into %T", v)
	}
	m.b = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// handle is the server's UnknownServiceHandler: every call arrives here.
func (f *grpcFront) handle(_ any, ss grpc.ServerStream) error {
	ctx := ss.Context()
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "relay front: no method")
	}
	md, _ := metadata.FromIncomingContext(ctx)
	h := make(http.Header, len(md)+2)
	host := ""
	for k, vs := range md {
		switch {
		case k == ":authority":
			if len(vs) > 0 {
				host = vs[0]
			}
			continue
		case strings.HasPrefix(k, ":"):
			continue
		}
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if strings.HasSuffix(k, "-bin") {
			// grpc-go decodes binary metadata; on the wire it is base64.
			enc := make([]string, len(vs))
			for i, v := range vs {
				enc[i] = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			h[ck] = enc
			continue
		}
		h[ck] = vs
	}
	h["Content-Type"] = []string{"application/grpc"}
	h["Te"] = []string{"trailers"}
	if dl, ok := ctx.Deadline(); ok {
		h["Grpc-Timeout"] = []string{encodeTimeout(time.Until(dl))}
	}
	r := &http.Request{
		Method:        http.MethodPost,
		URL:           &url.URL{Path: method},
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        h,
		Body:          &frontBody{ss: ss},
		ContentLength: -1,
		Host:          host,
		RequestURI:    method,
	}
	if p, ok := peer.FromContext(ctx); ok {
		if p.Addr != nil {
			r.RemoteAddr = p.Addr.String()
		}
		if ai, ok := p.AuthInfo.(frontAuthInfo); ok {
			st := ai.State
			r.TLS = &st
			ctx = connValues{Context: ctx, conn: ai.ctx}
		}
	}
	r = r.WithContext(ctx)
	w := &frontWriter{ss: ss, h: make(http.Header, 4)}
	f.h.ServeHTTP(w, r)
	return w.finish()
}

// encodeTimeout writes d as a grpc-timeout value.
func encodeTimeout(d time.Duration) string {
	if d <= 0 {
		return "1n"
	}
	if us := d.Microseconds(); us < 1e8 {
		return strconv.FormatInt(max(us, 1), 10) + "u"
	}
	if ms := d.Milliseconds(); ms < 1e8 {
		return strconv.FormatInt(ms, 10) + "m"
	}
	return strconv.FormatInt(min(int64(d.Seconds()), 99999999), 10) + "S"
}

// frontBody reads a call's request messages as a gRPC request body: each
// message behind its 5-byte frame header.
type frontBody struct {
	ss     grpc.ServerStream
	hdr    [5]byte
	hdrOff int
	msg    []byte
	have   bool
	err    error
}

func (b *frontBody) Read(p []byte) (int, error) {
	for !b.have {
		if b.err != nil {
			return 0, b.err
		}
		var m frameMsg
		if err := b.ss.RecvMsg(&m); err != nil {
			b.err = err
			return 0, err
		}
		b.hdr[0] = 0
		binary.BigEndian.PutUint32(b.hdr[1:], uint32(len(m.b)))
		b.hdrOff, b.msg, b.have = 0, m.b, true
	}
	n := 0
	if b.hdrOff < len(b.hdr) {
		n = copy(p, b.hdr[b.hdrOff:])
		b.hdrOff += n
		p = p[n:]
	}
	m := copy(p, b.msg)
	b.msg = b.msg[m:]
	n += m
	if b.hdrOff == len(b.hdr) && len(b.msg) == 0 {
		b.have, b.msg = false, nil
	}
	return n, nil
}

func (b *frontBody) Close() error { return nil }

// frontWriter is the http.ResponseWriter of a call on the front.
type frontWriter struct {
	ss         grpc.ServerStream
	h          http.Header
	code       int
	sentHeader bool
	part       []byte // the start of a message not yet complete
	err        error
}

func (w *frontWriter) Header() http.Header { return w.h }

func (w *frontWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

// Write sends every complete message in b (framed as on the wire) and keeps
// the start of an incomplete one for the next Write.
func (w *frontWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	n := len(b)
	if len(w.part) > 0 {
		w.part = append(w.part, b...)
		b = w.part
	}
	for len(b) >= 5 {
		if b[0] != 0 {
			w.err = status.Error(codes.Internal, "relay: the machine sent a compressed message the client did not ask for")
			return 0, w.err
		}
		size := int(binary.BigEndian.Uint32(b[1:5]))
		if len(b)-5 < size {
			break
		}
		if err := w.send(b[5 : 5+size]); err != nil {
			w.err = err
			return 0, err
		}
		b = b[5+size:]
	}
	if len(b) == 0 {
		w.part = w.part[:0]
	} else {
		w.part = append(make([]byte, 0, len(b)), b...)
	}
	return n, nil
}

func (w *frontWriter) send(msg []byte) error {
	if !w.sentHeader {
		w.sentHeader = true
		if md := headerMD(w.h); len(md) > 0 {
			w.ss.SetHeader(md)
		}
	}
	return w.ss.SendMsg(&frameMsg{b: msg})
}

// Flush sends the response headers if no message has: a stream whose
// client waits for them before any message.
func (w *frontWriter) Flush() {
	if w.sentHeader || w.code == 0 || w.h.Get("Grpc-Status") != "" {
		return
	}
	w.sentHeader = true
	if err := w.ss.SendHeader(headerMD(w.h)); err != nil && w.err == nil {
		w.err = err
	}
}

// headerMD is the metadata of response headers h: what a client would see
// of them, without HTTP/2's and gRPC's own.
func headerMD(h http.Header) metadata.MD {
	md := metadata.MD{}
	for k, vs := range h {
		lk := strings.ToLower(k)
		switch {
		case lk == "content-type", lk == "trailer", lk == "te", strings.HasPrefix(lk, "grpc-"),
			strings.HasPrefix(k, http.TrailerPrefix), strings.HasPrefix(lk, ":"):
			continue
		}
		md[lk] = decodeBin(lk, vs)
	}
	return md
}

func decodeBin(key string, vs []string) []string {
	if !strings.HasSuffix(key, "-bin") {
		return vs
	}
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(v, "="))
		if err != nil {
			continue
		}
		out = append(out, string(b))
	}
	return out
}

// finish turns what the handler left in the headers into the call's
// status and trailer metadata.
func (w *frontWriter) finish() error {
	if w.err != nil {
		return w.err
	}
	tr := http.Header{}
	for k, vs := range w.h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			tr[textproto.CanonicalMIMEHeaderKey(k[len(http.TrailerPrefix):])] = vs
		}
	}
	for _, decl := range w.h.Values("Trailer") {
		for _, k := range strings.Split(decl, ",") {
			k = textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(k))
			if vs := w.h.Values(k); len(vs) > 0 {
				tr[k] = vs
			}
		}
	}
	if tr.Get("Grpc-Status") == "" && w.h.Get("Grpc-Status") != "" {
		tr = w.h // a trailers-only answer
	}
	if len(w.part) > 0 {
		return status.Error(codes.Internal, "relay: the machine's answer ended inside a message")
	}
	if md := headerMD(tr); len(md) > 0 {
		w.ss.SetTrailer(md)
	}
	s := tr.Get("Grpc-Status")
	if s == "" {
		if w.code != 0 && w.code != http.StatusOK {
			return status.Errorf(codes.Unknown, "relay: HTTP %d without a gRPC status", w.code)
		}
		return status.Error(codes.Unknown, "relay: the call ended without a status")
	}
	c, err := strconv.Atoi(s)
	if err != nil {
		return status.Errorf(codes.Unknown, "relay: malformed grpc-status %q", s)
	}
	if c == 0 {
		return nil
	}
	msg := decodeGrpcMessage(tr.Get("Grpc-Message"))
	if d := tr.Get("Grpc-Status-Details-Bin"); d != "" {
		if b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d, "=")); err == nil {
			var p spb.Status
			if proto.Unmarshal(b, &p) == nil {
				p.Code, p.Message = int32(c), msg
				return status.FromProto(&p).Err()
			}
		}
	}
	return status.Error(codes.Code(c), msg)
}

// decodeGrpcMessage undoes the percent-encoding of grpc-message.
func decodeGrpcMessage(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	if d, err := url.PathUnescape(s); err == nil {
		return d
	}
	return s
}

var _ io.ReadCloser = (*frontBody)(nil)
