package webapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc/codes"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// WebSocket timing and bounds.
const (
	helloTimeout   = 10 * time.Second
	pingInterval   = 30 * time.Second
	pingTimeout    = 20 * time.Second
	writeTimeout   = 20 * time.Second
	actionTimeout  = 30 * time.Second // one client action's gRPC call
	enqueueTimeout = 10 * time.Second // how long a full queue may stay full
	sendQueue      = 64               // messages waiting for the writer
	maxSubs        = 100              // subscriptions per socket
	maxInflight    = 8                // client actions running at once
)

// timing is the WebSocket's timing; tests shorten it.
type timing struct {
	hello, ping, write, enqueue time.Duration
	// feedChanged, when set (tests), is called after a subscription joins
	// or leaves a shared feed; it must not block.
	feedChanged func()
}

var defaultTiming = timing{hello: helloTimeout, ping: pingInterval, write: writeTimeout, enqueue: enqueueTimeout}

// Close codes besides the standard ones.
const (
	closeUnauthenticated websocket.StatusCode = 4401
)

// socket is one WebSocket. Its goroutines: the reader (started by
// serveWS, which returns), one at a time running what the reader read
// (aside), a writer only while messages wait (none while the socket is
// idle), a pinger every ping interval, the closer once the socket ends, one
// per subscription until it joins its session's shared stream
// (sessionFeed), and one per client action in flight; the reader owns them
// all and waits for them.
type socket struct {
	h       *Handler
	c       *websocket.Conn
	log     *slog.Logger
	ctx     context.Context // ends when the socket is done
	cancel  context.CancelFunc
	rpc     context.Context // ctx with the caller's credentials
	machine string
	hub     *watchHub // set once joined

	closeMu     sync.Mutex // guards the two below
	closeCode   websocket.StatusCode
	closeReason string

	qmu       sync.Mutex    // guards the queue: the fields below
	queue     [][]byte      // messages waiting for the writer, oldest first
	queued    int           // their bytes
	overSince time.Time     // when the queue grew past sendQueue (zero: it is not)
	writing   bool          // a writer runs
	room      chan struct{} // closed when the writer takes a message (nil: nobody waits)
	closing   bool          // the socket ends: nothing more is queued or started
	pingTimer *time.Timer

	writeMu sync.Mutex // held while writing queued messages, so they leave in order

	mu   sync.Mutex // guards subs
	subs map[string]*subscription

	wg       sync.WaitGroup // every goroutine but the reader
	inflight chan struct{}
}

// subscription is one session streamed to the socket: first by its own
// goroutine and stream, then, once caught up, by the session's feed.
type subscription struct {
	s      *socket
	id     string
	cancel context.CancelFunc
	done   chan struct{} // closed when its goroutine returned

	// Set by the goroutine when it joined a feed (read after done); then
	// guarded by feed.mu.
	feed        *sessionFeed
	skip        uint64 // the feed skips events up to here: the goroutine sent them
	last        uint64 // replay_done goes out with the first event at or after last
	pendingDone bool   // replay_done is still owed
}

// originOK reports whether a page of the request's Origin may open the
// WebSocket: the same host, or an allowed origin. A request without
// Origin comes from no browser and needs only its token.
func (h *Handler) originOK(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	return h.origins[strings.ToLower(u.Scheme+"://"+u.Host)]
}

func (h *Handler) serveWS(w http.ResponseWriter, r *http.Request) {
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
	c, err := websocket.Accept(smallBuffers{w}, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true, // originOK checked it
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		h.wg.Done()
		return // Accept answered
	}
	c.SetReadLimit(MaxBodyBytes)
	h.metrics.sockets.Inc()
	// The socket's calls keep the request's values (the relay puts the
	// browser's address there for audit and rate limits) but end with the
	// socket (or the handler's Close), not with the request.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	stop := context.AfterFunc(h.ctx, cancel)
	s := &socket{h: h, c: c, log: h.opts.Log, ctx: ctx, cancel: cancel,
		subs: map[string]*subscription{}, inflight: make(chan struct{}, maxInflight)}
	// The socket is served by a goroutine of its own (counted in h.wg, so
	// Close still waits for it), and this handler returns: net/http then
	// drops what it keeps per connection while a handler runs (its
	// connection state, the upgrade request, the handler goroutine's
	// stack), which an idle socket would otherwise hold for its life.
	go func() {
		defer h.wg.Done()
		defer h.metrics.sockets.Dec()
		defer stop()
		s.run()
	}()
}

// fail ends the socket with code; the first reason wins.
func (s *socket) fail(code websocket.StatusCode, reason string) {
	s.closeMu.Lock()
	if s.closeCode == 0 {
		s.closeCode, s.closeReason = code, reason
	}
	s.closeMu.Unlock()
	s.cancel()
}

// Bounds of a socket's queue. Producers that may wait (a subscription's
// own replay, answers to the client) wait while sendQueue messages are
// queued; shared producers (the session list, a session's feed) never wait
// on one socket and may go past it, up to maxQueued messages and, past
// sendQueue, maxQueuedBytes. A queue past sendQueue for longer than the
// enqueue timeout, or past those bounds, closes the socket as too slow
// (1013): nothing grows without bound.
const (
	maxQueued      = 16 * sendQueue // a stall of seconds in a fast turn (small deltas)
	maxQueuedBytes = 4 << 20        // the memory bound for large messages
)

// send queues a message, waiting while the queue is full; a socket whose
// queue stays full for the enqueue timeout is closed (1013) rather than
// buffering without bound. It reports false when the message was dropped
// because ctx or the socket ended.
func (s *socket) send(ctx context.Context, msg any) bool {
	b, err := json.Marshal(msg)
	if err != nil {
		s.log.Error("web: encode message", "err", err)
		return false
	}
	var t *time.Timer
	for {
		s.qmu.Lock()
		if s.closing {
			s.qmu.Unlock()
			return false
		}
		if len(s.queue) < sendQueue {
			s.pushLocked(b)
			s.qmu.Unlock()
			return true
		}
		if s.room == nil {
			s.room = make(chan struct{})
		}
		room := s.room
		s.qmu.Unlock()
		if t == nil {
			t = time.NewTimer(s.h.timing.enqueue)
			defer t.Stop()
		}
		select {
		case <-room:
		case <-ctx.Done():
			return false
		case <-s.ctx.Done():
			return false
		case <-t.C:
			s.fail(websocket.StatusTryAgainLater, "too slow: messages piled up")
			return false
		}
	}
}

// trySend queues a message without waiting (sendShared).
func (s *socket) trySend(msg any) {
	b, err := json.Marshal(msg)
	if err != nil {
		return
	}
	s.sendShared(b)
}

// trySendBytes is trySend of an encoded message.
func (s *socket) trySendBytes(b []byte) { s.sendShared(b) }

// sendShared queues an encoded message without waiting: the producer
// serves other sockets too. A socket whose queue is past its bounds is
// closed as too slow.
func (s *socket) sendShared(b []byte) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.closing {
		return
	}
	n := len(s.queue)
	switch {
	case n >= maxQueued,
		n >= sendQueue && s.queued+len(b) > maxQueuedBytes,
		n >= sendQueue && !s.overSince.IsZero() && time.Since(s.overSince) > s.h.timing.enqueue:
		s.closing = true
		s.fail(websocket.StatusTryAgainLater, "too slow: messages piled up") // takes no lock of the queue's
		return
	}
	s.pushLocked(b)
}

// pushLocked queues b and starts the writer if none runs. qmu is held and
// the socket is not closing (so the reader's final wait has not begun: the
// closer, counted in wg, is still to run).
func (s *socket) pushLocked(b []byte) {
	s.queue = append(s.queue, b)
	s.queued += len(b)
	if len(s.queue) > sendQueue && s.overSince.IsZero() {
		s.overSince = time.Now()
	}
	if !s.writing {
		s.writing = true
		s.wg.Add(1)
		go s.writeLoop()
	}
}

// popLocked takes the oldest queued message; nil when none. qmu is held.
func (s *socket) popLocked() []byte {
	if len(s.queue) == 0 {
		return nil
	}
	b := s.queue[0]
	s.queue[0] = nil
	s.queue = s.queue[1:]
	if len(s.queue) == 0 {
		s.queue = nil // drop the backing array: an idle socket holds none
	}
	s.queued -= len(b)
	if len(s.queue) <= sendQueue {
		s.overSince = time.Time{}
	}
	if s.room != nil {
		close(s.room)
		s.room = nil
	}
	return b
}

// writeLoop writes queued messages until none is left, then ends: an idle
// socket has no writer goroutine.
func (s *socket) writeLoop() {
	defer s.wg.Done()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	for {
		s.qmu.Lock()
		var b []byte
		if !s.closing {
			b = s.popLocked()
		}
		if b == nil {
			s.writing = false
			s.qmu.Unlock()
			return
		}
		s.qmu.Unlock()
		// Not s.ctx: ending the socket must not abort a write (and with it
		// the connection) before the close code is sent.
		ctx, cancel := context.WithTimeout(context.Background(), s.h.timing.write)
		err := s.c.Write(ctx, websocket.MessageText, b)
		cancel()
		if err != nil {
			s.log.Debug("web: WebSocket write failed", "err", err)
			s.fail(websocket.StatusTryAgainLater, "write failed or too slow")
			s.c.CloseNow()
			return // writing stays set: nothing more is written
		}
	}
}

// schedulePing arms the next ping; the pinger runs only when it is due.
func (s *socket) schedulePing() {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.closing {
		return
	}
	s.pingTimer = time.AfterFunc(s.h.timing.ping, func() {
		s.qmu.Lock()
		if s.closing {
			s.qmu.Unlock()
			return
		}
		s.wg.Add(1)
		s.qmu.Unlock()
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
		err := s.c.Ping(ctx)
		cancel()
		if err != nil {
			s.log.Debug("web: WebSocket ping failed", "err", err)
			s.fail(websocket.StatusPolicyViolation, "no pong")
			s.c.CloseNow()
			return
		}
		s.schedulePing()
	})
}

// closeConn runs once the socket ended: it stops queueing, flushes what is
// queued (best effort, briefly, after the write in progress) and closes
// with the recorded code, which ends the reader.
func (s *socket) closeConn() {
	s.qmu.Lock()
	s.closing = true
	if s.pingTimer != nil {
		s.pingTimer.Stop()
	}
	if s.room != nil {
		close(s.room)
		s.room = nil
	}
	s.qmu.Unlock()
	s.closeMu.Lock()
	if s.closeCode == 0 {
		s.closeCode, s.closeReason = websocket.StatusGoingAway, "server shutting down"
	}
	code, reason := s.closeCode, s.closeReason
	s.closeMu.Unlock()
	if code != websocket.StatusTryAgainLater {
		s.writeMu.Lock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		for {
			s.qmu.Lock()
			b := s.popLocked()
			s.qmu.Unlock()
			if b == nil || s.c.Write(ctx, websocket.MessageText, b) != nil {
				break
			}
		}
		cancel()
		s.writeMu.Unlock()
	}
	if code != websocket.StatusNormalClosure && code != websocket.StatusGoingAway {
		s.log.Debug("web: WebSocket closed", "code", int(code), "reason", reason)
	}
	s.c.Close(code, reason)
}

// hello is the first client message.
type hello struct {
	Type          string `json:"type"`
	Token         string `json:"token"`
	Machine       string `json:"machine"`
	Subscriptions []struct {
		SessionID     string `json:"sessionId"`
		AfterSequence uint64 `json:"afterSequence"`
	} `json:"subscriptions"`
}

// run serves the socket until it ends, then stops and waits for every
// goroutine it started.
func (s *socket) run() {
	// The closer always runs: the socket's ctx ends below at the latest.
	s.wg.Add(1)
	context.AfterFunc(s.ctx, func() {
		defer s.wg.Done()
		s.closeConn()
	})
	s.schedulePing()
	defer func() {
		s.cancel()
		s.unsubscribeAll()
		if s.hub != nil {
			s.hub.leave(s)
		}
		s.wg.Wait()
		s.c.CloseNow()
	}()

	helloTimer := time.AfterFunc(s.h.timing.hello, func() {
		s.fail(websocket.StatusPolicyViolation, "no hello within 10s")
	})
	typ, data, err := s.c.Read(context.Background())
	helloTimer.Stop()
	if err != nil {
		s.readFailed(err)
		return
	}
	// The hello's work (decoding it, the token check, the snapshot) and
	// every later message's run deep in encoding/json and gRPC. Done on the
	// reader, they would grow its stack (kept for the socket's whole life)
	// to 8 KiB and more, which the runtime cannot shrink while the reader
	// waits below them; aside runs them on goroutines of their own.
	ok := false
	aside(func() { ok = s.hello(typ, data) })
	if !ok {
		return
	}
	for {
		typ, data, err := s.c.Read(context.Background())
		if err != nil {
			s.readFailed(err)
			return
		}
		if typ != websocket.MessageText {
			s.send(s.ctx, Event{"type": "error", "code": "INVALID_ARGUMENT", "message": "send JSON text messages"})
			continue
		}
		aside(func() { s.handle(data) })
	}
}

// aside runs f on a new goroutine and waits for it: the reader's way of
// keeping deep calls off its own stack. f's goroutine ends before aside
// returns.
func aside(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

// hello acts on the first client message; false means the socket was
// failed.
func (s *socket) hello(typ websocket.MessageType, data []byte) bool {
	var hi hello
	if typ != websocket.MessageText || json.Unmarshal(data, &hi) != nil || hi.Type != "hello" {
		s.send(s.ctx, Event{"type": "error", "code": "INVALID_ARGUMENT", "message": "the first message must be {\"type\":\"hello\",\"token\":...}"})
		s.fail(websocket.StatusPolicyViolation, "hello expected")
		return false
	}
	if hi.Token == "" {
		s.unauthenticated("hello needs a token")
		return false
	}
	s.machine = hi.Machine
	c := caller{token: hi.Token, machine: hi.Machine}
	s.rpc = s.h.outgoing(s.ctx, c)
	if !s.start(c) {
		return false
	}
	for _, sub := range hi.Subscriptions {
		if sub.SessionID != "" {
			s.subscribe(sub.SessionID, sub.AfterSequence)
		}
	}
	return true
}

// readFailed ends the socket after the reader failed.
func (s *socket) readFailed(err error) {
	s.log.Debug("web: WebSocket read ended", "err", err)
	code := websocket.CloseStatus(err)
	switch {
	case code == -1:
		s.fail(websocket.StatusGoingAway, "read failed")
	default:
		s.fail(code, "")
	}
}

func (s *socket) unauthenticated(msg string) {
	s.send(s.ctx, Event{"type": "error", "code": "UNAUTHENTICATED", "message": msg})
	s.fail(closeUnauthenticated, "unauthenticated")
}

// start checks the token, queues the snapshot and joins the caller's
// session-list hub; false means the socket was failed.
func (s *socket) start(c caller) bool {
	// Every socket checks its own token, also when it joins a stream
	// another socket of the same caller opened.
	if err := s.h.checkToken(s.rpc); err != nil {
		s.refuseStart(err, "token check failed")
		return false
	}
	snap := Event{"type": "snapshot"}
	if m := s.machineInfo(); m != nil {
		snap["machine"] = m
	}
	if err := s.h.join(s, c, snap); err != nil {
		s.refuseStart(err, "snapshot failed")
		return false
	}
	return true
}

// refuseStart ends a socket whose start failed with err: 4401 for a refused
// token, else an error message and 1011 with reason.
func (s *socket) refuseStart(err error, reason string) {
	e := fromGRPC(err)
	if e.status == http.StatusUnauthorized {
		s.unauthenticated(e.message)
		return
	}
	if s.ctx.Err() == nil {
		s.send(s.ctx, withRetryAfter(Event{"type": "error", "code": e.code, "message": e.message}, e))
		s.fail(websocket.StatusInternalError, reason)
	}
}

// machineInfo is the snapshot's machine: the agent's own, or on the relay
// the one hello named.
func (s *socket) machineInfo() *Machine {
	if s.h.opts.Role == RoleAgent {
		m := s.h.localMachine()
		return &m
	}
	if s.machine == "" {
		return nil
	}
	pm, err := s.h.machines.GetMachine(s.rpc, &pb.GetMachineRequest{MachineId: s.machine})
	if err != nil {
		return nil
	}
	m := machineOf(pm, s.machine)
	return &m
}

// pendingIDs are the request and question ids of open prompts.
func pendingIDs(evs []*pb.AgentEvent) []string {
	ids := make([]string, 0, len(evs))
	for _, ev := range evs {
		if p := ev.GetPermissionRequest(); p != nil {
			ids = append(ids, p.RequestId)
		} else if q := ev.GetUserQuestion(); q != nil {
			ids = append(ids, q.QuestionId)
		}
	}
	return ids
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// subscribe starts (or restarts) streaming a session. Only the reader
// calls it (through aside: one call at a time).
func (s *socket) subscribe(id string, after uint64) bool {
	s.unsubscribe(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.subs) >= maxSubs {
		return false
	}
	ctx, cancel := context.WithCancel(s.rpc)
	sub := &subscription{s: s, id: id, cancel: cancel, done: make(chan struct{})}
	s.subs[id] = sub
	s.wg.Add(1)
	go s.stream(ctx, after, sub)
	return true
}

// unsubscribe stops streaming a session and waits until it stopped: no
// message of it is queued after this returns.
func (s *socket) unsubscribe(id string) {
	s.mu.Lock()
	sub := s.subs[id]
	delete(s.subs, id)
	s.mu.Unlock()
	if sub != nil {
		sub.stop()
	}
}

// unsubscribeAll stops every subscription (the socket ends).
func (s *socket) unsubscribeAll() {
	s.mu.Lock()
	subs := s.subs
	s.subs = map[string]*subscription{}
	s.mu.Unlock()
	for _, sub := range subs {
		sub.stop()
	}
}

// stop ends the subscription's goroutine, then leaves its feed.
func (sub *subscription) stop() {
	sub.cancel()
	<-sub.done
	if sub.feed != nil {
		sub.feed.leave(sub)
	}
}

// feedEnded ends a subscription whose feed's stream failed.
func (s *socket) feedEnded(sub *subscription, err error) {
	s.mu.Lock()
	current := s.subs[sub.id] == sub
	if current {
		delete(s.subs, sub.id)
	}
	s.mu.Unlock()
	sub.cancel()
	if !current {
		return // unsubscribed or replaced meanwhile
	}
	s.sendShared(mustMarshal(subscriptionEnded(sub.id, err)))
}

// subscriptionEnded is the subscription_ended message of session id's
// stream that failed with err; retryAfterMs passes on the relay's hint
// (retry_after_ms: the machine is moving between replicas, a rate limit).
func subscriptionEnded(id string, err error) Event {
	e := fromGRPC(err)
	return withRetryAfter(Event{"type": "subscription_ended", "sessionId": id, "code": e.code, "message": e.message}, e)
}

// withRetryAfter adds e's retry_after_ms, if it has one, to ev as
// retryAfterMs: when the client should try again.
func withRetryAfter(ev Event, e betcodeError) Event {
	if ms, ok := e.retryAfterMs(); ok {
		ev["retryAfterMs"] = ms
	}
	return ev
}

// stream sends a session's events after a sequence, then replay_done, then
// live events, until ctx ends or the stream fails (subscription_ended).
// It reads its own stream only while it is behind the session's feed
// (shared with the caller's other sockets) and hands over to the feed as
// soon as it has caught up with it, then returns.
func (s *socket) stream(ctx context.Context, after uint64, sub *subscription) {
	defer s.wg.Done()
	defer close(sub.done)
	id := sub.id
	ended := func(err error) {
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		if s.subs[id] == sub {
			delete(s.subs, id)
		}
		s.mu.Unlock()
		s.send(ctx, subscriptionEnded(id, err))
	}
	last, err := s.h.lastSequence(ctx, id)
	if err != nil {
		ended(err)
		return
	}
	if after > last {
		ended(statusError(codes.OutOfRange, "INVALID_ARGUMENT", "afterSequence is past the session's last sequence"))
		return
	}
	caughtUp := after >= last
	if caughtUp && !s.send(ctx, Event{"type": "replay_done", "sessionId": id, "seq": last}) {
		return
	}
	// Its own stream, opened only when the feed is ahead.
	var own interface {
		Recv() (*pb.AgentEvent, error)
	}
	ownCtx, ownCancel := context.WithCancel(ctx)
	defer ownCancel()
	sent := after
	for {
		if ctx.Err() != nil {
			return
		}
		if hub := s.hub; hub != nil && hub.tryJoin(sub, sent, last, !caughtUp) {
			return // the feed streams it from here
		}
		if own == nil {
			if own, err = s.h.follow(ownCtx, id, sent); err != nil {
				ended(err)
				return
			}
		}
		ev, err := own.Recv()
		if err != nil {
			ended(err)
			return
		}
		if ev.Sequence <= sent {
			continue
		}
		sent = ev.Sequence
		if e := eventOf(id, ev); e != nil && !s.send(ctx, e) {
			return
		}
		if !caughtUp && ev.Sequence >= last {
			caughtUp = true
			if !s.send(ctx, Event{"type": "replay_done", "sessionId": id, "seq": ev.Sequence}) {
				return
			}
		}
	}
}

// clientMessage is any client message; type says which fields count.
type clientMessage struct {
	Type           string            `json:"type"`
	ID             string            `json:"id"`
	SessionID      string            `json:"sessionId"`
	AfterSequence  uint64            `json:"afterSequence"`
	RequestID      string            `json:"requestId"`
	Behavior       string            `json:"behavior"`
	Message        string            `json:"message"`
	UpdatedInput   map[string]any    `json:"updatedInput"`
	QuestionID     string            `json:"questionId"`
	Answers        map[string]string `json:"answers"`
	Text           string            `json:"text"`
	Files          []FileAttachment  `json:"files"`
	IdempotencyKey string            `json:"idempotencyKey"`
}

// refuse answers a client message with an error.
func (s *socket) refuse(m *clientMessage, code, msg string) {
	e := Event{"type": "error", "code": code, "message": msg}
	if m != nil && m.ID != "" {
		e["id"] = m.ID
	}
	if m != nil && m.SessionID != "" {
		e["sessionId"] = m.SessionID
	}
	s.send(s.ctx, e)
}

func (s *socket) ack(m *clientMessage, extra Event) {
	if m.ID == "" {
		return
	}
	e := Event{"type": "ack", "id": m.ID}
	for k, v := range extra {
		e[k] = v
	}
	s.send(s.ctx, e)
}

// handle acts on one client message.
func (s *socket) handle(data []byte) {
	var m clientMessage
	if err := json.Unmarshal(data, &m); err != nil {
		s.refuse(nil, "INVALID_ARGUMENT", "malformed JSON: "+err.Error())
		return
	}
	needSession := func() bool {
		if m.SessionID == "" {
			s.refuse(&m, "INVALID_ARGUMENT", m.Type+" needs sessionId")
			return false
		}
		return true
	}
	switch m.Type {
	case "ping":
		e := Event{"type": "pong"}
		if m.ID != "" {
			e["id"] = m.ID
		}
		s.send(s.ctx, e)
	case "hello":
		s.refuse(&m, "INVALID_ARGUMENT", "already authenticated: hello is the first message only")
	case "subscribe":
		if !needSession() {
			return
		}
		if !s.subscribe(m.SessionID, m.AfterSequence) {
			s.refuse(&m, "TOO_MANY_SUBSCRIPTIONS", "at most 100 sessions per socket; unsubscribe some")
			return
		}
		s.ack(&m, nil)
	case "unsubscribe":
		if !needSession() {
			return
		}
		s.unsubscribe(m.SessionID)
		s.ack(&m, nil)
	case "permission_response", "question_response", "user_message", "cancel":
		if !needSession() {
			return
		}
		select {
		case s.inflight <- struct{}{}:
		case <-s.ctx.Done():
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.inflight }()
			s.act(&m)
		}()
	default:
		s.refuse(&m, "INVALID_ARGUMENT", "unknown message type "+jsonQuote(m.Type))
	}
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// act performs a client action through gRPC and answers ack or error.
func (s *socket) act(m *clientMessage) {
	ctx, cancel := context.WithTimeout(s.rpc, actionTimeout)
	defer cancel()
	var seq uint64
	var err error
	switch m.Type {
	case "permission_response":
		seq, err = s.h.sendPermission(ctx, m.SessionID, m.RequestID,
			permissionAnswer{Behavior: m.Behavior, Message: m.Message, UpdatedInput: m.UpdatedInput})
	case "question_response":
		seq, err = s.h.sendAnswer(ctx, m.SessionID, m.QuestionID, m.Answers)
	case "user_message":
		var resp *pb.QueueMessageResponse
		if resp, err = s.h.sendMessage(ctx, m.SessionID, m.Text, m.Files, m.IdempotencyKey); err == nil {
			seq = resp.Sequence
		}
	case "cancel":
		_, err = s.h.agent.CancelTurn(ctx, &pb.CancelTurnRequest{SessionId: m.SessionID})
	}
	if err != nil {
		var fe fileError
		if errors.As(err, &fe) {
			s.refuse(m, "INVALID_ARGUMENT", fe.Error())
			return
		}
		e := fromGRPC(err)
		s.refuse(m, e.code, e.message)
		return
	}
	if seq != 0 {
		s.ack(m, Event{"sequence": seq})
		return
	}
	s.ack(m, nil)
}
