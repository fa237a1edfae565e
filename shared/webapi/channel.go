package webapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// MaxCarrierMessage is the largest binary message /api/channel and
// /api/pair take (docs/e2ee-wire.md §1): one Noise message is at most
// 65,535 bytes.
const MaxCarrierMessage = 70_000

// maxCloseReason is the most bytes a WebSocket close reason may have.
const maxCloseReason = 123

// carrier is the client side of a ChannelService.Open or .Pair call: one
// Noise message per gRPC message.
type carrier interface {
	Send(data []byte) error
	Recv() ([]byte, error)
}

type openCarrier struct {
	grpc.BidiStreamingClient[pb.OpenRequest, pb.OpenResponse]
}

func (c openCarrier) Send(b []byte) error {
	return c.BidiStreamingClient.Send(&pb.OpenRequest{Data: b})
}

func (c openCarrier) Recv() ([]byte, error) {
	m, err := c.BidiStreamingClient.Recv()
	return m.GetData(), err
}

type pairCarrier struct {
	grpc.BidiStreamingClient[pb.PairRequest, pb.PairResponse]
}

func (c pairCarrier) Send(b []byte) error {
	return c.BidiStreamingClient.Send(&pb.PairRequest{Data: b})
}

func (c pairCarrier) Recv() ([]byte, error) {
	m, err := c.BidiStreamingClient.Recv()
	return m.GetData(), err
}

// serveChannel is GET /api/channel: ChannelService.Open over a WebSocket.
func (h *Handler) serveChannel(w http.ResponseWriter, r *http.Request) {
	h.serveCarrier(w, r, "channel", func(ctx context.Context) (carrier, error) {
		s, err := pb.NewChannelServiceClient(h.opts.Conn).Open(ctx)
		return openCarrier{s}, err
	})
}

// servePair is GET /api/pair: ChannelService.Pair over a WebSocket.
func (h *Handler) servePair(w http.ResponseWriter, r *http.Request) {
	h.serveCarrier(w, r, "pairing", func(ctx context.Context) (carrier, error) {
		s, err := pb.NewChannelServiceClient(h.opts.Conn).Pair(ctx)
		return pairCarrier{s}, err
	})
}

// carrierHello is the first client message of /api/channel and /api/pair.
type carrierHello struct {
	Type    string `json:"type"`
	Token   string `json:"token"`
	Machine string `json:"machine"`
}

// closeStatus is how a carrier WebSocket ends.
type closeStatus struct {
	code   websocket.StatusCode
	reason string
}

// serveCarrier carries one ChannelService call over a WebSocket
// (docs/e2ee-wire.md §1): the hello names the credential and the machine,
// then every binary message is one Noise message each way. The relay (or
// the agent) authenticates, limits, audits and routes the call as any
// other: the WebSocket carries only its messages.
func (h *Handler) serveCarrier(w http.ResponseWriter, r *http.Request, what string, call func(context.Context) (carrier, error)) {
	if !h.originOK(r) {
		writeError(w, http.StatusForbidden, "ORIGIN_NOT_ALLOWED", "this page's origin may not open the WebSocket (see --web-origin)")
		return
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "SHUTTING_DOWN", "the server is shutting down")
		return
	}
	h.wg.Add(1)
	h.mu.Unlock()
	defer h.wg.Done()
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true, // originOK checked it
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		return // Accept answered
	}
	defer c.CloseNow()
	c.SetReadLimit(MaxCarrierMessage)
	h.metrics.sockets.Inc()
	defer h.metrics.sockets.Dec()
	// The call keeps the request's values (the relay's audit and limits
	// read the browser's address there) and ends with the socket or the
	// handler's Close.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	stop := context.AfterFunc(h.ctx, cancel)
	defer stop()
	cs, readerDone := h.runCarrier(ctx, cancel, c, what, call)
	if h.ctx.Err() != nil {
		cs = closeStatus{websocket.StatusGoingAway, "server shutting down"}
	}
	// Close reads the client's close frame (through the reader, if it
	// runs), which ends the reader.
	_ = c.Close(cs.code, cs.reason)
	<-readerDone
}

// runCarrier serves an accepted carrier WebSocket until the call or the
// socket ends, and returns how to close the socket and a channel closed
// when its reader goroutine has ended: at the latest once the socket is
// closed.
func (h *Handler) runCarrier(ctx context.Context, cancel context.CancelFunc, c *websocket.Conn, what string, call func(context.Context) (carrier, error)) (closeStatus, <-chan struct{}) {
	readerDone := make(chan struct{})
	hi, cs, ok := h.carrierHello(c)
	if !ok {
		close(readerDone)
		return cs, readerDone
	}
	stream, err := call(h.outgoing(ctx, caller{token: hi.Token, machine: hi.Machine}))
	if err != nil {
		close(readerDone)
		return grpcClose(err), readerDone
	}

	// The reader: client messages up, until the socket ends (its close, a
	// text message, a read error) or the call does (a failed Send).
	var (
		mu    sync.Mutex
		upEnd *closeStatus // why the reader ended the call, if it did
	)
	go func() {
		defer close(readerDone)
		defer cancel()
		for {
			typ, data, err := c.Read(context.Background())
			if err != nil {
				mu.Lock()
				upEnd = readEnd(err)
				mu.Unlock()
				return
			}
			if typ != websocket.MessageBinary {
				mu.Lock()
				upEnd = &closeStatus{websocket.StatusProtocolError, "protocol error: only binary messages after the hello"}
				mu.Unlock()
				return
			}
			if err := stream.Send(data); err != nil {
				return // Recv below tells why
			}
		}
	}()

	// Down: the call's messages to the client, until the call ends.
	var cs2 closeStatus
	for {
		data, err := stream.Recv()
		if err != nil {
			cs2 = grpcClose(err)
			break
		}
		// Not ctx: a write cut short by the call's end would drop the
		// connection before the close code goes out.
		wctx, wcancel := context.WithTimeout(context.Background(), h.timing.write)
		err = c.Write(wctx, websocket.MessageBinary, data)
		wcancel()
		if err != nil {
			cancel()
			cs2 = closeStatus{websocket.StatusTryAgainLater, "write failed or too slow"}
			break
		}
	}
	cancel()
	mu.Lock()
	if upEnd != nil {
		cs2 = *upEnd
	}
	mu.Unlock()
	h.opts.Log.Debug("web: "+what+" WebSocket ended", "code", int(cs2.code), "reason", cs2.reason)
	return cs2, readerDone
}

// carrierHello reads the hello; false means the socket is to close with cs.
func (h *Handler) carrierHello(c *websocket.Conn) (carrierHello, closeStatus, bool) {
	// A late hello gets its close code: the timer closes the socket, which
	// ends the Read (cancelling the Read's context would drop the
	// connection without one).
	late := closeStatus{websocket.StatusPolicyViolation, "no hello within 10s"}
	timerDone := make(chan struct{})
	timer := time.AfterFunc(h.timing.hello, func() {
		defer close(timerDone)
		_ = c.Close(late.code, late.reason)
	})
	typ, data, err := c.Read(context.Background())
	if !timer.Stop() {
		<-timerDone
		return carrierHello{}, late, false
	}
	var hi carrierHello
	switch {
	case err != nil:
		return hi, *readEnd(err), false
	case typ != websocket.MessageText || json.Unmarshal(data, &hi) != nil || hi.Type != "hello":
		return hi, closeStatus{websocket.StatusPolicyViolation, `hello expected: {"type":"hello","token":...,"machine":...}`}, false
	case hi.Token == "":
		return hi, closeStatus{closeUnauthenticated, "UNAUTHENTICATED: hello needs a token"}, false
	}
	return hi, closeStatus{}, true
}

// readEnd is why a carrier's read failed: the client's close (answered
// with its own code) or a broken connection; a message over the limit is
// 1009.
func readEnd(err error) *closeStatus {
	if code := websocket.CloseStatus(err); code != -1 {
		return &closeStatus{code, ""}
	}
	if errors.Is(err, websocket.ErrMessageTooBig) {
		return &closeStatus{websocket.StatusMessageTooBig, "a message is over 70000 bytes"}
	}
	return &closeStatus{websocket.StatusGoingAway, "read failed"}
}

// grpcClose is the close status of a call that ended with err (io.EOF: it
// ended OK): 1000, or 4000 + the HTTP status of its code with reason
// "CODE: message" (docs/e2ee-wire.md §1).
func grpcClose(err error) closeStatus {
	if errors.Is(err, io.EOF) || status.Code(err) == codes.OK {
		return closeStatus{websocket.StatusNormalClosure, ""}
	}
	e := fromGRPC(err)
	return closeStatus{websocket.StatusCode(4000 + e.status), truncateReason(e.code + ": " + e.message)}
}

// truncateReason cuts a close reason to 123 bytes without splitting a
// UTF-8 character.
func truncateReason(s string) string {
	if len(s) <= maxCloseReason {
		return s
	}
	n := maxCloseReason
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
