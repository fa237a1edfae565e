package channelsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/betcode-dev/betcode/agent/pairing"
	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/shared/e2ee"
	"github.com/betcode-dev/betcode/shared/webapi"
)

// MaxWebRequests is how many req frames of one channel run at once; the
// machine reads the channel's next frame once one of them has finished.
const MaxWebRequests = 64

// channelToken is the bearer token the channel's web API sends its own
// gRPC calls: it must send one, and the agent ignores it on a channel's
// connection (localtoken.Guard trusts an e2ee.Addr peer), where the
// device's paired key is the authorization.
const channelToken = "e2ee-channel"

// deviceKey is the context key of the channel's device.
type deviceKey struct{}

// DeviceFromContext returns the paired device whose channel a request of
// the web protocol came through (Service.PushHandler's requests carry it).
func DeviceFromContext(ctx context.Context) (pairing.Device, bool) {
	d, ok := ctx.Value(deviceKey{}).(pairing.Device)
	return d, ok
}

// channelConn is one end of an in-memory pipe that the agent's gRPC server
// sees as a connection of the channel's device: its addresses are the
// channel's, so the agent authorizes its calls as those of a CLI's channel.
type channelConn struct {
	net.Conn
	local, remote net.Addr
}

func (c channelConn) LocalAddr() net.Addr  { return c.local }
func (c channelConn) RemoteAddr() net.Addr { return c.remote }

// webChannel serves one browser channel: web/1 frames over c, answered by
// the agent's web API acting as the device.
type webChannel struct {
	s   *Service
	c   *e2ee.Conn
	dev pairing.Device
	log *slog.Logger
	ctx context.Context // ends with the channel

	cc   *grpc.ClientConn // to the agent's gRPC server, as the device
	api  *webapi.Handler
	http *http.Server // api for the event socket, on pipe
	// pipe hands http the in-memory connections the event socket dials.
	// Not grpc's bufconn: its SetReadDeadline can lose a reset to a timer
	// that fired meanwhile, and net/http sets and resets one when a
	// request's connection is hijacked, so a WebSocket's reads could fail
	// with "i/o timeout" at random (net.Pipe's deadlines are exact).
	pipe *Listener
	wg   sync.WaitGroup // every goroutine but the frame reader and http's

	wmu sync.Mutex // serializes frames to c

	mu       sync.Mutex
	reqs     map[string]context.CancelFunc // requests in flight by id
	events   *eventSocket                  // the open event socket, or nil
	slots    chan struct{}
	httpRun  bool          // http serves pipe
	httpDone chan struct{} // closed when http's Serve returned
}

// serveWeb serves a web/1 channel until it ends; it closes c.
func (s *Service) serveWeb(ctx context.Context, c *e2ee.Conn, dev pairing.Device) error {
	ctx, cancel := context.WithCancel(context.WithValue(ctx, deviceKey{}, dev))
	defer cancel()
	w := &webChannel{s: s, c: c, dev: dev, log: s.Log.With("device", dev.ID), ctx: ctx,
		reqs: map[string]context.CancelFunc{}, slots: make(chan struct{}, MaxWebRequests), pipe: NewListener()}
	local, remote := c.LocalAddr(), c.RemoteAddr()
	var err error
	w.cc, err = grpc.NewClient("passthrough:///channel",
		grpc.WithContextDialer(func(dctx context.Context, _ string) (net.Conn, error) {
			if ctx.Err() != nil {
				return nil, net.ErrClosed
			}
			return s.Listener.dial(dctx, local, remote)
		}),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.Close()
		return fmt.Errorf("web channel: connect to the agent: %w", err)
	}
	w.api, err = webapi.New(webapi.Options{Conn: w.cc, Role: webapi.RoleAgent, Version: s.Version, Log: s.Log,
		LocalMachine: &webapi.Machine{ID: s.MachineID, Name: s.MachineName}})
	if err != nil {
		w.cc.Close()
		c.Close()
		return fmt.Errorf("web channel: %w", err)
	}
	w.http = &http.Server{Handler: w.api, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(s.Log.Handler(), slog.LevelDebug)}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()

	err = w.readFrames()
	cancel()
	c.Close()
	w.wg.Wait()
	w.api.Close() // the event socket, if one is open
	w.mu.Lock()
	running := w.httpRun
	w.mu.Unlock()
	if running {
		_ = w.http.Close()
		<-w.httpDone
	}
	w.pipe.Close()
	w.cc.Close()
	return err
}

// readFrames reads and acts on the browser's frames until the channel
// ends: nil when it ended cleanly, an error for a malformed frame.
func (w *webChannel) readFrames() error {
	for {
		f, err := readWebFrame(w.c)
		if err != nil {
			if errors.Is(err, errMalformedFrame) {
				w.log.Warn("web channel ended: the device sent a malformed frame", "err", err)
				return err
			}
			return nil // the channel ended
		}
		switch f.T {
		case "req":
			if !validID(f.ID) {
				w.log.Warn("web channel ended: the device sent a malformed frame", "err", "a req frame without a numeric id")
				return fmt.Errorf("%w: a req frame without a numeric id", errMalformedFrame)
			}
			select {
			case w.slots <- struct{}{}:
			case <-w.ctx.Done():
				return nil
			}
			rctx, cancel := context.WithCancel(w.ctx)
			id := string(f.ID)
			w.mu.Lock()
			if old := w.reqs[id]; old != nil {
				old()
			}
			w.reqs[id] = cancel
			w.mu.Unlock()
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				defer func() { <-w.slots }()
				defer cancel()
				w.serveRequest(rctx, f)
				w.mu.Lock()
				if w.reqs[id] != nil && rctx.Err() == nil {
					delete(w.reqs, id)
				}
				w.mu.Unlock()
			}()
		case "cancel":
			w.mu.Lock()
			if cancel := w.reqs[string(f.ID)]; cancel != nil {
				delete(w.reqs, string(f.ID))
				cancel()
			}
			w.mu.Unlock()
		case "ws.open":
			w.openEvents(f.Subscriptions)
		case "ws":
			if f.Data == nil {
				w.log.Warn("web channel ended: the device sent a malformed frame", "err", "a ws frame without data")
				return fmt.Errorf("%w: a ws frame without data", errMalformedFrame)
			}
			w.mu.Lock()
			ev := w.events
			w.mu.Unlock()
			if ev != nil {
				ev.send(*f.Data)
			}
		case "ws.close":
			w.closeEvents()
		default:
			w.log.Debug("web channel: frame of an unknown type ignored", "t", f.T)
		}
	}
}

// validID reports whether id is a JSON number.
func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	var n json.Number
	return json.Unmarshal(id, &n) == nil && n != ""
}

// sendFrame writes one frame to the channel; it reports whether it went.
func (w *webChannel) sendFrame(f webFrame) bool {
	b, err := encodeWebFrame(f)
	if err != nil {
		w.log.Warn("web channel: frame not sent", "err", err)
		return false
	}
	w.wmu.Lock()
	defer w.wmu.Unlock()
	_, err = w.c.Write(b)
	return err == nil
}

// serveRequest answers one req frame with a res frame (none once the
// browser cancelled it).
func (w *webChannel) serveRequest(ctx context.Context, f webFrame) {
	status, body := w.answer(ctx, f)
	if ctx.Err() != nil {
		return
	}
	if len(body) > MaxWebFrame-1024 {
		status, body = http.StatusInternalServerError, `{"error":"the answer is over the channel's 4 MiB frame limit","code":"RESPONSE_TOO_LARGE"}`
	}
	w.sendFrame(webFrame{T: "res", ID: f.ID, Status: status, Body: &body})
}

// answer runs one REST call of the web API as the device.
func (w *webChannel) answer(ctx context.Context, f webFrame) (int, string) {
	if f.Method == "" || !strings.HasPrefix(f.Path, "/") {
		return http.StatusBadRequest, `{"error":"a req frame needs a method and a path starting with /","code":"INVALID_ARGUMENT"}`
	}
	var body io.Reader = http.NoBody
	if f.Body != nil {
		body = strings.NewReader(*f.Body)
	}
	route := f.Path
	if i := strings.IndexByte(route, '?'); i >= 0 {
		route = route[:i]
	}
	var h http.Handler = w.api
	target := "/api" + f.Path
	switch {
	case route == "/machines" || strings.HasPrefix(route, "/machines/"),
		route == "/ws", route == "/channel", route == "/pair", route == "/sealed":
		return http.StatusNotFound, `{"error":"no such resource inside a channel: ` + jsonEscape(route) + `","code":"NOT_FOUND"}`
	case route == "/push" || strings.HasPrefix(route, "/push/"):
		if w.dev.Share != "" {
			// The machine's notifications tell of every session: a
			// teammate's device sees the shared one only.
			return http.StatusForbidden, `{"error":"a shared session's device gets no push notifications from this machine","code":"SHARE_SCOPE"}`
		}
		if w.s.PushHandler == nil {
			return http.StatusNotFound, `{"error":"this machine sends no push notifications","code":"NOT_FOUND"}`
		}
		h, target = w.s.PushHandler, f.Path
	}
	r, err := http.NewRequestWithContext(ctx, f.Method, target, body)
	if err != nil {
		return http.StatusBadRequest, `{"error":"malformed request: ` + jsonEscape(err.Error()) + `","code":"INVALID_ARGUMENT"}`
	}
	r.RemoteAddr = w.c.RemoteAddr().String()
	r.Header.Set("Authorization", "Bearer "+channelToken)
	if f.Body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	rec := &memResponse{header: http.Header{}}
	h.ServeHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.over {
		return http.StatusInternalServerError, `{"error":"the answer is over the channel's 4 MiB frame limit","code":"RESPONSE_TOO_LARGE"}`
	}
	return rec.status, rec.body.String()
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// memResponse is an in-memory http.ResponseWriter whose body is bounded by
// a frame.
type memResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
	over   bool
}

func (m *memResponse) Header() http.Header { return m.header }

func (m *memResponse) WriteHeader(status int) {
	if m.status == 0 {
		m.status = status
	}
}

func (m *memResponse) Write(b []byte) (int, error) {
	if m.status == 0 {
		m.status = http.StatusOK
	}
	if m.body.Len()+len(b) > MaxWebFrame {
		m.over = true
		return 0, errors.New("answer over the frame limit")
	}
	return m.body.Write(b)
}

// checkHello decodes a channel's hello into h and refuses a protocol this
// machine does not speak (the device sees the reason).
func checkHello(raw []byte, h *pairing.Hello) error {
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, h) // a name is all it adds; a CLI's may be anything
	}
	switch h.Protocol {
	case "", pairing.ProtocolWeb:
		return nil
	}
	return fmt.Errorf("this machine does not speak the channel protocol %q (it speaks %q): update it", h.Protocol, pairing.ProtocolWeb)
}

// serveWebStatus serves a web/1 channel and maps its end to the call's
// status: a malformed frame is INVALID_ARGUMENT (the browser sees 4400).
func (s *Service) serveWebStatus(ctx context.Context, c *e2ee.Conn, dev pairing.Device) error {
	err := s.serveWeb(ctx, c, dev)
	if errors.Is(err, errMalformedFrame) {
		return server.Status(codes.InvalidArgument, "WEB_PROTOCOL", "the channel ended: "+err.Error())
	}
	if err != nil {
		s.Log.Warn("web channel", "device", dev.ID, "err", err)
		return server.Status(codes.Unavailable, "", err.Error())
	}
	return nil
}
