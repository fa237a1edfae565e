package tunnel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/callpark"
	"github.com/betcode-dev/betcode/shared/h2client"
)

// Client is the relay's end of one machine's tunnel.
//
// When the agent supports it (CapabilityHTTP2), the tunnel's bytes are one
// HTTP/2 connection that the agent's grpc.Server serves natively, and every
// call is an HTTP/2 stream on it with its own flow control: no per-call
// translation on either end, and no extra multiplexer goroutines. Otherwise
// the bytes carry a yamux session and each call gets its own yamux stream
// and the TunnelFrame call protocol (Forward, Serve).
//
// Either way nothing starts until the first call, so an idle tunnel costs
// only the OpenTunnel stream. An agent that can (CapabilityDirect) is then
// invited to carry the calls on a direct connection (direct.go).
type Client struct {
	conn  net.Conn
	useH2 bool

	mu     sync.Mutex
	sess   *yamux.Session
	cc     callConn // over the tunnel stream, once started
	closed bool
	done   chan struct{}

	offer   func(token []byte) // sends a DirectOffer; nil: the agent cannot
	token   []byte             // the offer outstanding, until used
	offered time.Time          // when the last offer was sent
	direct  callConn           // the calls' connection, once attached
	engine  bool               // calls' connections get h2client, not net/http
}

// callConn is an HTTP/2 client connection that carries calls to the agent:
// net/http's (*http.ClientConn) or the engine's (h2client.Conn).
type callConn interface {
	http.RoundTripper
	Err() error
	Close() error
}

// NewClient returns the relay's end of a tunnel over conn. h2 says whether
// the agent serves HTTP/2 on it (it registered CapabilityHTTP2).
func NewClient(conn net.Conn, h2 bool) *Client {
	return &Client{conn: conn, useH2: h2, done: make(chan struct{})}
}

// ErrClosed is returned for calls on a closed tunnel.
var ErrClosed = errors.New("tunnel closed")

// Done is closed when the tunnel has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Closed reports whether the tunnel has ended.
func (c *Client) Closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Close ends the tunnel and every call on it.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	sess, cc, direct := c.sess, c.cc, c.direct
	close(c.done)
	c.mu.Unlock()
	if direct != nil {
		direct.Close() // and its connection
	}
	if cc != nil {
		cc.Close()
	}
	if sess != nil {
		sess.Close()
	}
	return c.conn.Close()
}

// session returns the yamux session, starting it on first use.
func (c *Client) session() (*yamux.Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.useH2 {
		return nil, errors.New("this tunnel carries HTTP/2, not yamux")
	}
	if c.sess != nil {
		return c.sess, nil
	}
	sess, err := yamux.Client(c.conn, YamuxConfig())
	if err != nil {
		return nil, fmt.Errorf("start tunnel session: %w", err)
	}
	c.sess = sess
	go func() {
		<-sess.CloseChan()
		c.Close()
	}()
	return sess, nil
}

// OpenStream opens a raw call stream (TunnelFrame call protocol). Only a
// yamux tunnel has them.
func (c *Client) OpenStream() (net.Conn, error) {
	sess, err := c.session()
	if err != nil {
		return nil, err
	}
	st, err := sess.OpenStream()
	if err != nil {
		return nil, err
	}
	return st, nil
}

// maxAgentHeaderBytes bounds the header list of an agent's answer (its
// headers, and its trailers apart). An agent is its owner's program: a
// hostile one could otherwise make the relay read and hold net/http's
// default, 10 MiB, for each of up to --max-streams-per-tunnel calls (512 by
// default: 5 GiB; now at most 128 MiB). gRPC answers carry a status, its
// message twice (grpc-message, percent-encoded, and in
// grpc-status-details-bin, base64) and small details; BetCode's agent sends
// no other metadata, and its longest messages carry a 16 KiB stderr tail
// (up to about 70 KiB encoded). Beyond the limit the call fails and the
// relay drops the connection (TestHostileAgentDirectConnection).
const maxAgentHeaderBytes = 256 << 10

// h2Config bounds what the relay buffers: a stalled client's call holds at
// most MaxReceiveBufferPerStream in the relay; the connection window is
// large, so a few stalled calls never hold up the others.
var h2Config = http.HTTP2Config{
	MaxReceiveBufferPerStream:     1 << 20,
	MaxReceiveBufferPerConnection: 64 << 20,
}

// clientConn returns the HTTP/2 connection to the agent: the direct one if
// it is attached and healthy, else the one over the tunnel stream, started
// on first use (it lives as long as the tunnel).
func (c *Client) clientConn(ctx context.Context) (callConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if cc := c.directLocked(); cc != nil {
		return cc, nil
	}
	if c.cc == nil {
		// No pings: the stream's own gRPC keepalives watch it.
		cc, err := newCallConn(ctx, c.conn, c.engine, 0, 0)
		if err != nil {
			return nil, fmt.Errorf("start HTTP/2 on the tunnel: %w", err)
		}
		c.cc = cc
	}
	if err := c.cc.Err(); err != nil {
		return nil, fmt.Errorf("tunnel: %w", err)
	}
	return c.cc, nil
}

// newCallConn starts the HTTP/2 client connection that carries calls on
// conn: the relay's own (shared/h2client) if engine, else net/http's; with
// the limits of h2Config, and pings every pingEvery (0: none) answered
// within pingTimeout.
func newCallConn(ctx context.Context, conn net.Conn, engine bool, pingEvery, pingTimeout time.Duration) (callConn, error) {
	if engine {
		return h2client.New(ctx, conn, h2client.Options{
			MaxHeaderListSize: maxAgentHeaderBytes,
			StreamWindow:      uint32(h2Config.MaxReceiveBufferPerStream),
			ConnWindow:        uint32(h2Config.MaxReceiveBufferPerConnection),
			PingEvery:         pingEvery,
			PingTimeout:       pingTimeout,
		})
	}
	cfg := h2Config
	cfg.SendPingTimeout, cfg.PingTimeout = pingEvery, pingTimeout
	return newH2ClientConn(ctx, conn, &cfg)
}

// newH2ClientConn starts an HTTP/2 client connection on conn (already
// connected: the tunnel stream, or a direct connection) with cfg.
func newH2ClientConn(ctx context.Context, conn net.Conn, cfg *http.HTTP2Config) (*http.ClientConn, error) {
	protos := new(http.Protocols)
	protos.SetUnencryptedHTTP2(true)
	t := &http.Transport{
		Protocols:              protos,
		HTTP2:                  cfg,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxAgentHeaderBytes,
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			if conn == nil {
				return nil, ErrClosed // the one connection is used
			}
			cn := conn
			conn = nil
			return cn, nil
		},
	}
	return t.NewClientConn(ctx, "http", "machine:80")
}

// Forward carries one client call to the agent and writes the agent's
// answer to w. headers are added to the request's metadata (overriding the
// client's own values of those keys). It returns when the call is over.
func (c *Client) Forward(ctx context.Context, w http.ResponseWriter, r *http.Request, requestID string, headers http.Header) error {
	if !c.useH2 {
		st, err := c.OpenStream()
		if err != nil {
			writeTunnelFailed(w, err)
			return err
		}
		return Forward(ctx, st, w, r, requestID, headers)
	}
	cc, err := c.clientConn(ctx)
	if err != nil {
		writeTunnelFailed(w, err)
		return err
	}
	return forwardH2(ctx, cc, "http", "machine", w, r, headers, nil)
}

// Invoke makes one unary call with an already-serialized request message,
// as the relay does to deliver a buffered request. An error means the
// call's outcome is unknown (the tunnel broke); a Result with a non-zero
// Code is the agent's answer.
func (c *Client) Invoke(ctx context.Context, requestID, service, method string, md http.Header, request []byte) (*Result, error) {
	if !c.useH2 {
		st, err := c.OpenStream()
		if err != nil {
			return nil, err
		}
		return Invoke(st, requestID, service, method, md, request)
	}
	cc, err := c.clientConn(ctx)
	if err != nil {
		return nil, err
	}
	h := md.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/grpc")
	h.Set("Te", "trailers")
	frame := Frame(request)
	req := (&http.Request{
		Method:        http.MethodPost,
		URL:           &url.URL{Scheme: "http", Host: "machine", Path: "/" + service + "/" + method},
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        h,
		Body:          &bytesBody{Reader: bytes.NewReader(frame)},
		ContentLength: int64(len(frame)),
		Host:          "machine",
	}).WithContext(ctx)
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("call %s/%s: %w", service, method, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("call %s/%s: %w", service, method, err)
	}
	tr := resp.Trailer
	if tr.Get("Grpc-Status") == "" { // trailers-only answer
		tr = resp.Header
	}
	res, err := newResult(tr, body)
	if err != nil {
		return nil, fmt.Errorf("call %s/%s: %w", service, method, err)
	}
	return res, nil
}

// forwardH2 proxies one gRPC call over cc to scheme://host, byte for byte:
// headers, body chunks as they come (flushed when nothing more is waiting),
// trailers. If the request cannot be sent and unreached, when set, takes
// the error (returns true), nothing is written to w: its caller answers.
func forwardH2(parent context.Context, cc http.RoundTripper, scheme, host string, w http.ResponseWriter, r *http.Request, headers http.Header, unreached func(error) bool) error {
	if _, _, ok := SplitMethod(r.URL.Path); !ok {
		WriteStatus(w, 12, "malformed method path "+r.URL.Path, nil)
		return fmt.Errorf("malformed method %q", r.URL.Path)
	}
	// The call's deadline holds here too, so that a call the agent gives
	// up on at its deadline is answered DEADLINE_EXCEEDED, as a direct call
	// would be, not as a broken tunnel.
	f := &forwarding{parent: parent, ctx: parent, w: w}
	if d, ok := parseTimeout(r.Header.Get("Grpc-Timeout")); ok {
		f.ctx, f.cancel = context.WithTimeout(parent, d)
	}
	u := url.URL{Scheme: scheme, Host: host, Path: r.URL.Path, RawPath: r.URL.RawPath}
	out := (&http.Request{
		Method:        http.MethodPost,
		URL:           &u,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        callHeaders(r, headers),
		Body:          r.Body,
		ContentLength: -1,
		Host:          host,
	}).WithContext(f.ctx)
	out.Header["Te"] = []string{"trailers"}
	if r.Body == nil || r.Body == http.NoBody {
		out.Body = nil
	}

	resp, err := cc.RoundTrip(out)
	if err != nil {
		f.release()
		if parent.Err() != nil {
			return parent.Err() // the client left; nobody to answer
		}
		if unreached != nil && unreached(err) {
			return err
		}
		code, msg, details := callFailed(f.ctx, err)
		WriteStatus(w, code, msg, details)
		return err
	}
	f.resp = resp
	_, engine := resp.Body.(callpark.Notifier) // the engine's client's (h2client)
	if !engine {
		// A call ended from this side (its client gone, or the relay
		// ending it: a revoked token) must stop reading now. net/http's
		// response body's Read does not watch the context while the
		// request body is still being copied (a bidi stream whose client
		// sends nothing), so close it. The engine's client ends a call
		// whose context ended itself.
		f.stop = context.AfterFunc(parent, func() { resp.Body.Close() })
	}
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	if resp.StatusCode != http.StatusOK && resp.Header.Get("Grpc-Status") == "" {
		f.release()
		WriteStatus(w, codeInternal, fmt.Sprintf("the machine's end answered HTTP %d", resp.StatusCode), nil)
		return fmt.Errorf("the machine's end answered HTTP %d", resp.StatusCode)
	}
	w.WriteHeader(http.StatusOK)
	f.flusher, _ = w.(http.Flusher)
	// Headers with nothing behind them yet go out now: a stream resumed
	// on an idle session may have no message for hours, and its client
	// waits for the headers to know the call was taken. A body that
	// cannot say whether more is here (net/http's) has its headers
	// flushed too: that costs a unary call a write, but a stream must not
	// wait. A trailers-only answer (its status in the headers) leaves as
	// one frame at the end.
	if f.flusher != nil && resp.Header.Get("Grpc-Status") == "" && nothingYet(resp.Body) {
		f.flusher.Flush()
	}
	f.cr = newChunkReader(resp.Body)
	if engine {
		f.parker = callpark.Find(w)
		// Neither header map is read again: a parked call does not keep
		// them (the values live on in w's).
		resp.Header, out.Header = nil, nil
	}
	if f.copy() {
		return nil // parked: the call goes on without this goroutine
	}
	return f.err
}

// forwarding is one call forwardH2 proxies, from the agent's answer's
// headers on. While the answer has nothing for its client it may be
// parked (package callpark): no goroutine waits for it, and the answer's
// next bytes (or its end, or the client's) start one that copies them.
type forwarding struct {
	parent, ctx context.Context
	cancel      context.CancelFunc // ends ctx's own deadline; nil if none
	w           http.ResponseWriter
	flusher     http.Flusher
	resp        *http.Response
	stop        func() bool // unregisters the AfterFunc closing resp.Body
	cr          *chunkReader
	parker      callpark.Parker  // w's, if the call can be parked
	end         func(reset bool) // the parked call's end; nil until parked
	moved       bool             // a chunk of the answer was copied
	err         error            // why the call failed, once over
}

// copy copies the answer to the client until it ends, reporting false, or
// until it parks the call, reporting true (it must then return at once:
// the answer's callback may already be running).
func (f *forwarding) copy() (parked bool) {
	for {
		// Parked only once the answer has moved something: a unary
		// answer's message and trailers then never pay for it (they come
		// together), and a stream that waits for its next event does.
		if f.moved && f.parker != nil && !moreHere(f.resp.Body) && f.park() {
			return true
		}
		chunk, _, err := f.cr.read()
		if len(chunk) > 0 {
			f.moved = true
			if _, werr := f.w.Write(chunk); werr != nil {
				f.finish(fmt.Errorf("write to client: %w", werr))
				return false
			}
			// Flush unless more is known to be here already: the body
			// holds more bytes now, or the answer has ended (its trailers
			// follow at once, and the end of the call flushes them with
			// the data in one write). A body that cannot say (net/http's)
			// is flushed after every write, a full read included: the
			// relay's own front holds written bytes until a flush, so a
			// chunk that happened to fill the buffer must not wait for
			// the agent's next one. (Holding bytes back for up to 500 µs,
			// so that a unary answer's trailers would leave with its
			// message, measured no better.)
			if f.flusher != nil && !moreHere(f.resp.Body) {
				f.flusher.Flush()
			}
		}
		if err == io.EOF { // the answer's end; a wrapped EOF is a failure
			for k, vs := range f.resp.Trailer {
				for _, v := range vs {
					f.w.Header().Add(http.TrailerPrefix+k, v)
				}
			}
			f.finish(nil)
			return false
		}
		if err != nil {
			if f.parent.Err() != nil {
				f.finish(f.parent.Err())
				return false
			}
			code, msg, details := callFailed(f.ctx, err)
			setTrailer(f.w, "Grpc-Status", strconv.Itoa(code))
			setTrailer(f.w, "Grpc-Message", encodeGrpcMessage(msg))
			if details != nil {
				setTrailer(f.w, "Grpc-Status-Details-Bin", encodeBin(details))
			}
			f.finish(fmt.Errorf("read from tunnel: %w", err))
			return false
		}
	}
}

// park parks the call until the answer has something: false if it has
// something already (copy reads on).
func (f *forwarding) park() bool {
	if f.end == nil {
		if f.end = f.parker.Park(); f.end == nil {
			f.parker = nil // parked by someone else: not ours to park
			return false
		}
	}
	f.cr.close() // its small buffer is not held while the call waits
	if callpark.NotifyVia(f.resp.Body, f.resume) {
		return true
	}
	f.cr.reopen()
	return false
}

// resume runs on the goroutine the answer's callback started: it copies
// what came and parks again, or ends the call.
func (f *forwarding) resume() {
	defer func() {
		// As the relay's front does for a handler's panic: the call is
		// reset, the process goes on.
		if p := recover(); p != nil {
			slog.Error("tunnel: panic while relaying a parked call", "panic", p, "stack", string(debug.Stack()))
			f.release()
			f.end(true)
		}
	}()
	f.cr.reopen()
	f.copy()
}

// finish ends the call with err (nil: the answer ended), releasing what it
// holds; a parked call is ended.
func (f *forwarding) finish(err error) {
	f.err = err
	f.release()
	if f.end != nil {
		f.end(false)
	}
}

// release gives back what the call holds.
func (f *forwarding) release() {
	if f.cr != nil {
		f.cr.close()
	}
	if f.stop != nil {
		f.stop()
	}
	if f.resp != nil {
		f.resp.Body.Close()
	}
	if f.cancel != nil {
		f.cancel()
	}
}

// callFailed says how to answer a call whose HTTP/2 stream to the agent
// failed: past its deadline, DEADLINE_EXCEEDED; reset by the agent,
// CANCELLED; otherwise the tunnel broke (UNAVAILABLE, TUNNEL_DISCONNECTED).
func callFailed(ctx context.Context, err error) (code int, msg string, details []byte) {
	switch {
	case pastDeadline(ctx):
		return codeDeadlineExceeded, "deadline exceeded", nil
	case isPeerCancel(err):
		return codeCanceled, "the machine cancelled the call", nil
	}
	msg = "machine tunnel disconnected during the call: " + err.Error()
	return codeUnavailable, msg, tunnelDisconnected(codeUnavailable, msg)
}

// isPeerCancel reports whether err is the agent resetting the call's stream
// with CANCEL.
func isPeerCancel(err error) bool {
	var se *h2client.StreamError
	if errors.As(err, &se) {
		return se.Remote && se.Code == http2.ErrCodeCancel
	}
	// net/http's HTTP/2 stream errors are not exported types.
	return strings.Contains(err.Error(), "; CANCEL; received from peer")
}

// moreHere reports whether b is known to hold more of its stream already,
// or its end: bytes it can return without waiting, or nothing more to
// come.
func moreHere(b io.Reader) bool {
	bb, ok := b.(h2client.Buffered) // the engine's bodies, both ways
	if !ok {
		return false
	}
	n, ended := bb.Buffered()
	return n > 0 || ended
}

// nothingYet reports whether b may have nothing for its reader yet: it
// holds no bytes and has not ended, or it cannot say (net/http's).
func nothingYet(b io.Reader) bool { return !moreHere(b) }

// bytesBody is a request body held in memory. It says so (Buffered), so
// the engine's client sends a call's headers and its whole body in one
// write.
type bytesBody struct{ *bytes.Reader }

// Buffered reports the bytes left; they are all there is.
func (b *bytesBody) Buffered() (int, bool) { return b.Len(), true }

// Close does nothing.
func (b *bytesBody) Close() error { return nil }

// pastDeadline reports whether ctx's deadline has come (within a
// millisecond), whether or not ctx has ended for it yet. The agent gets the call's
// grpc-timeout as the relay did, a little later, so its deadline is never
// earlier than the relay's; when it resets the stream for its deadline, the
// relay's timer may not have run yet (a loaded machine), and the call must
// still end DEADLINE_EXCEEDED, not CANCELLED.
func pastDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && time.Until(d) < time.Millisecond
}

// parseTimeout reads a grpc-timeout header value ("100m", "5S", ...).
func parseTimeout(s string) (time.Duration, bool) {
	if len(s) < 2 || len(s) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	return time.Duration(n) * unit, true
}
