package tunnel

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// A direct connection's calls go through grpc-go's own client transport,
// not net/http's HTTP/2 client. A unary call then costs the relay no
// goroutine of its own and one write for its HEADERS, DATA and END_STREAM,
// where net/http's client starts a goroutine per request and writes each
// frame on its own: measured, about 60 µs less CPU per relayed unary call
// and a p99 roughly halved (docs/benchmarks-relay.md). The messages pass
// through as bytes (rawCodec): nothing is decoded.
//
// Only unary calls take it (UnaryMethod): grpc-go's client hands messages
// over one at a time, and a stream forwarded that way would be written to
// its client message by message, where the byte path (forwardH2, over the
// OpenTunnel stream) passes on whatever has arrived in one write.

// UnaryMethod reports whether path ("/pkg.Service/Method") names a unary
// method that this binary's protobuf registry knows (every BetCode service
// is registered). A method it does not know (an agent newer than the
// relay) is forwarded as a stream, which works for every kind of call.
func UnaryMethod(path string) bool {
	service, method, ok := SplitMethod(path)
	if !ok {
		return false
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return false
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return false
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	return md != nil && !md.IsStreamingClient() && !md.IsStreamingServer()
}

// rawCodec passes gRPC messages through as bytes: a request is a *[]byte
// holding the message; a response is decoded into a *[]byte as the framed
// message (its 5-byte prefix, then the message), ready to write back.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
	}
	n := data.Len()
	out := make([]byte, 5+n)
	binary.BigEndian.PutUint32(out[1:5], uint32(n))
	data.CopyTo(out[5:])
	*b = out
	return nil
}

// Name is "proto": the agent's server checks the content subtype.
func (rawCodec) Name() string { return "proto" }

// directRPC is grpc-go's client on one accepted direct connection.
type directRPC struct {
	cc   *grpc.ClientConn
	conn *watchedConn
}

// watchedConn records that its connection failed (a read or write error,
// or grpc-go closing it), so that a failed call can be told apart from an
// UNAVAILABLE answer of the agent's.
type watchedConn struct {
	net.Conn
	broken atomic.Bool
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.broken.Store(true)
	}
	return n, err
}

func (c *watchedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		c.broken.Store(true)
	}
	return n, err
}

func (c *watchedConn) Close() error {
	c.broken.Store(true)
	return c.Conn.Close()
}

// dialDirectRPC starts grpc-go's client on conn, an accepted direct
// connection, and waits until the agent has answered its HTTP/2 preface.
// The connection is used once: grpc-go never dials again.
func dialDirectRPC(ctx context.Context, conn net.Conn) (*directRPC, error) {
	wc := &watchedConn{Conn: conn}
	var used atomic.Bool
	dial := func(context.Context, string) (net.Conn, error) {
		if used.Swap(true) {
			return nil, ErrClosed
		}
		return wc, nil
	}
	every := max(directPingEvery, 10*time.Second) // grpc-go pings at most every 10 s
	cc, err := grpc.NewClient("passthrough:///machine",
		grpc.WithContextDialer(dial),
		grpc.WithTransportCredentials(insecure.NewCredentials()), // TLS is the direct connection's own
		grpc.WithDisableRetry(),
		grpc.WithDisableServiceConfig(),
		grpc.WithIdleTimeout(0),           // idleness would close the connection
		grpc.WithInitialWindowSize(1<<20), // static windows: no BDP pings
		grpc.WithInitialConnWindowSize(64<<20),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: every, Timeout: directPingTimeout, PermitWithoutStream: true}),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)),
		grpc.WithUserAgent("betcode-relay"),
	)
	if err != nil {
		conn.Close()
		return nil, err
	}
	d := &directRPC{cc: cc, conn: wc}
	cc.Connect()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if s == connectivity.TransientFailure || s == connectivity.Shutdown || wc.broken.Load() || !cc.WaitForStateChange(ctx, s) {
			d.close()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("the agent did not answer on the direct connection: %w", ctx.Err())
			}
			return nil, errors.New("the direct connection failed before its first call")
		}
	}
	return d, nil
}

// healthy reports whether d can take calls: a direct connection is never
// dialed again, so any state but Ready means it is gone.
func (d *directRPC) healthy() bool {
	return !d.conn.broken.Load() && d.cc.GetState() == connectivity.Ready
}

// close closes the client and its connection.
func (d *directRPC) close() {
	d.cc.Close()
	d.conn.Close()
}

// reservedCallHeaders are not passed as a unary call's metadata: grpc-go
// sets them itself.
var reservedCallHeaders = map[string]bool{
	"Content-Type": true, "User-Agent": true, "Grpc-Timeout": true, "Grpc-Encoding": true,
	"Grpc-Accept-Encoding": true, "Grpc-Message-Type": true, "Content-Length": true,
}

// uncompressed reports whether r's messages are sent uncompressed: a
// compressed call takes the byte path, which passes them on as they are.
func uncompressed(r *http.Request) bool {
	enc := r.Header.Get("Grpc-Encoding")
	return enc == "" || enc == "identity"
}

// forward carries one unary call over d and writes the answer to w. The
// request's one message is read whole first. headers are added to the
// request's metadata, as for the byte path.
func (d *directRPC) forward(parent context.Context, w http.ResponseWriter, r *http.Request, headers http.Header) error {
	msg, err := readUnaryRequest(r.Body)
	if err != nil {
		if parent.Err() != nil {
			return parent.Err() // ended by the relay (a message over the limit) or the client
		}
		if st, ok := status.FromError(err); ok {
			WriteStatus(w, int(st.Code()), st.Message(), nil)
		} else {
			WriteStatus(w, codeInternal, "read the request: "+err.Error(), nil)
		}
		return err
	}
	ctx := parent
	if t, ok := parseTimeout(r.Header.Get("Grpc-Timeout")); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(parent, t)
		defer cancel()
	}
	md, err := outgoingMD(callHeaders(r, headers))
	if err != nil {
		WriteStatus(w, int(codes.Internal), err.Error(), nil)
		return err
	}
	var hdr, trl metadata.MD
	var resp []byte
	err = d.cc.Invoke(metadata.NewOutgoingContext(ctx, md), r.URL.Path, &msg, &resp, grpc.Header(&hdr), grpc.Trailer(&trl))
	if parent.Err() != nil {
		return parent.Err() // the client left; nobody to answer
	}
	if err != nil {
		if code, msg, details, failed := d.callFailed(ctx, err); failed {
			WriteStatus(w, code, msg, details)
			return err
		}
	}
	st := status.Convert(err)
	h := w.Header()
	putMD(h, hdr, "")
	h.Set("Content-Type", "application/grpc")
	putMD(h, trl, http.TrailerPrefix)
	setTrailer(w, "Grpc-Status", strconv.Itoa(int(st.Code())))
	if m := st.Message(); m != "" {
		setTrailer(w, "Grpc-Message", encodeGrpcMessage(m))
	}
	if p := st.Proto(); len(p.GetDetails()) > 0 {
		if b, merr := proto.Marshal(p); merr == nil {
			setTrailer(w, "Grpc-Status-Details-Bin", encodeBin(b))
		}
	}
	w.WriteHeader(http.StatusOK)
	if err == nil {
		if _, werr := w.Write(resp); werr != nil {
			return fmt.Errorf("write to client: %w", werr)
		}
	}
	return nil
}

// callFailed says whether a failed call failed on the relay's side (its
// deadline passed here, or the direct connection broke) rather than with
// the agent's answer, and how to answer it then: as the byte path does
// (callFailed in client.go).
func (d *directRPC) callFailed(ctx context.Context, err error) (code int, msg string, details []byte, failed bool) {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return codeDeadlineExceeded, "deadline exceeded", nil, true
	case status.Code(err) == codes.Unavailable && d.conn.broken.Load():
		msg = "machine tunnel disconnected during the call: " + status.Convert(err).Message()
		return codeUnavailable, msg, tunnelDisconnected(codeUnavailable, msg), true
	}
	return 0, "", nil, false
}

// invoke makes one unary call with an already-serialized request, as
// Client.Invoke does.
func (d *directRPC) invoke(ctx context.Context, service, method string, md http.Header, request []byte) (*Result, error) {
	out, err := outgoingMD(md)
	if err != nil {
		return nil, err
	}
	var resp []byte
	err = d.cc.Invoke(metadata.NewOutgoingContext(ctx, out), "/"+service+"/"+method, &request, &resp)
	if err != nil {
		if _, _, _, failed := d.callFailed(ctx, err); failed || ctx.Err() != nil {
			return nil, fmt.Errorf("call %s/%s: %w", service, method, err)
		}
		st := status.Convert(err)
		return &Result{Code: int(st.Code()), Message: st.Message()}, nil
	}
	return &Result{Response: resp[5:]}, nil
}

// readUnaryRequest reads a unary call's body: exactly one uncompressed
// message. The message is read as it arrives, so a prefix announcing more
// than is sent costs no memory.
func readUnaryRequest(body io.Reader) ([]byte, error) {
	if body == nil || body == http.NoBody {
		return nil, status.Error(codes.Internal, "unary call without a request message")
	}
	var prefix [5]byte
	if _, err := io.ReadFull(body, prefix[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, status.Error(codes.Internal, "unary call without a request message")
		}
		return nil, err
	}
	if prefix[0] != 0 {
		return nil, status.Error(codes.Internal, "a compressed message in a call without grpc-encoding")
	}
	n := int64(binary.BigEndian.Uint32(prefix[1:]))
	msg, err := io.ReadAll(io.LimitReader(body, n))
	if err != nil {
		return nil, err
	}
	if int64(len(msg)) < n {
		return nil, status.Errorf(codes.Internal, "the request ended %d bytes into a message of %d", len(msg), n)
	}
	var one [1]byte
	for {
		k, err := body.Read(one[:])
		if k > 0 {
			return nil, status.Error(codes.Internal, "more than one request message for a unary method")
		}
		if errors.Is(err, io.EOF) {
			return msg, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// outgoingMD turns a call's headers into gRPC metadata: keys lowercased,
// binary (-bin) values decoded, the headers grpc-go sets itself left out.
func outgoingMD(h http.Header) (metadata.MD, error) {
	md := make(metadata.MD, len(h))
	for k, vs := range h {
		if reservedCallHeaders[k] || strings.HasPrefix(k, ":") {
			continue
		}
		key := strings.ToLower(k)
		if !strings.HasSuffix(key, "-bin") {
			md[key] = vs
			continue
		}
		dec := make([]string, 0, len(vs))
		for _, v := range vs {
			for part := range strings.SplitSeq(v, ",") {
				b, err := decodeBinValue(strings.TrimSpace(part))
				if err != nil {
					return nil, fmt.Errorf("metadata %s is not base64: %w", key, err)
				}
				dec = append(dec, string(b))
			}
		}
		md[key] = dec
	}
	return md, nil
}

// decodeBinValue decodes a binary header value, padded or not.
func decodeBinValue(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}

// putMD writes the agent's metadata md into h under prefix
// (http.TrailerPrefix for trailers), binary values base64-encoded; the
// gRPC protocol's own keys are left to the caller.
func putMD(h http.Header, md metadata.MD, prefix string) {
	for k, vs := range md {
		if k == "content-type" || strings.HasPrefix(k, "grpc-") || strings.HasPrefix(k, ":") {
			continue
		}
		bin := strings.HasSuffix(k, "-bin")
		for _, v := range vs {
			if bin {
				v = encodeBin([]byte(v))
			}
			h.Add(prefix+k, v)
		}
	}
}
