package h2front

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"golang.org/x/net/http2"
)

// stream is one client-initiated stream. Fields below mu are guarded by
// the connection's mu; rw's handler-side fields belong to the handler
// goroutine.
type stream struct {
	c      *conn
	id     uint32
	ctx    context.Context
	cancel context.CancelFunc
	req    *http.Request
	body   body
	rw     responseWriter

	// Guarded by c.mu.
	bodyCond   sync.Cond // body data, end, close or reset
	bodyNotify func()    // body.Notify's callback, run at the next wake
	remoteDone bool      // END_STREAM received (half-closed remote)
	bodyClosed bool      // handler closed the body or returned
	reset      bool      // reset by either side, or connection ended
	resetErr   error
	done       bool // handler finished and the stream left the table
	sendWin    int64
	recvAvail  int32 // receive window left for the peer
	recvUnsent int32 // consumed bytes not yet refunded
	declLen    int64 // the request's content-length, or -1 when none
	recvLen    int64 // request DATA bytes received (padding excluded)
}

func newStream(c *conn, id uint32) *stream {
	st := &stream{c: c, id: id}
	st.ctx, st.cancel = context.WithCancel(c.ctx)
	st.bodyCond.L = &c.mu
	st.body.st = st
	st.rw.st = st
	c.mu.Lock()
	st.sendWin = int64(c.peerInitWin)
	st.recvAvail = c.streamRecvWin
	c.mu.Unlock()
	return st
}

// endRemoteLocked records END_STREAM from the client.
func (st *stream) endRemoteLocked() {
	st.remoteDone = true
	st.body.ended = true
}

// abortLocked ends the stream because of a reset or the connection's end:
// its context is cancelled, blocked readers and writers wake with err, and
// its unread body is refunded to the connection.
func (st *stream) abortLocked(err error) {
	if st.reset {
		return
	}
	st.reset = true
	st.resetErr = err
	st.cancel()
	st.discardBodyLocked()
	st.wakeBodyLocked()
	st.c.sendCond.Broadcast()
}

// wakeBodyLocked wakes the body's readers: data, its end, its close or the
// stream's reset.
func (st *stream) wakeBodyLocked() {
	st.bodyCond.Broadcast()
	if f := st.bodyNotify; f != nil {
		st.bodyNotify = nil
		go f()
	}
}

// removeStreamLocked takes st out of the stream table (it no longer counts
// as open) and, unless its handler already finished, aborts it.
func (c *conn) removeStreamLocked(st *stream, err error) {
	if c.streams[st.id] == st {
		delete(c.streams, st.id)
	}
	if !st.done {
		st.abortLocked(err)
	}
	c.maybeWakeLocked()
}

// run executes the handler on its own goroutine and finishes the stream,
// unless the handler detached it (Detach): then whoever holds the stream
// finishes it.
func (st *stream) run() {
	c := st.c
	panicked := true
	defer func() {
		if !panicked {
			return
		}
		p := recover()
		if p != http.ErrAbortHandler {
			c.log.Error("h2front: handler panic", "remote", c.remoteAddr, "stream", st.id, "path", st.req.URL.Path, "panic", p)
		}
		if st.rw.detached == nil || st.rw.detached.claim() {
			st.finishReset(http2.ErrCodeInternal)
			st.end()
		}
	}()
	c.srv.Handler.ServeHTTP(&st.rw, st.req)
	panicked = false
	if p := st.rw.parked; p != nil {
		p.returned()
		return
	}
	if st.rw.detached != nil {
		return
	}
	st.rw.finish()
	st.end()
}

// end releases what a running handler holds: its context, and its place
// among the connection's running handlers.
func (st *stream) end() {
	c := st.c
	st.cancel()
	c.mu.Lock()
	c.running--
	c.mu.Unlock()
	c.wg.Done()
}

// detach is the state of a detached stream: its finish runs once.
type detach struct{ once sync.Once }

// claim reports whether the caller is the one to finish the stream.
func (d *detach) claim() bool {
	first := false
	d.once.Do(func() { first = true })
	return first
}

// Detach lets the handler return while its stream stays open: the stream
// is finished, as a handler's return would finish it, by the first call of
// the returned function (with reset true: ended with RST_STREAM instead,
// as after a panic). Until then the handler still counts as running (a
// graceful Shutdown waits for it) and the ResponseWriter and request body
// stay usable from any one goroutine at a time. The holder must call it at
// the latest once the request's context is done (the stream was reset or
// its connection ended); the connection's end waits for it. A stream that
// is served for hours (an agent's tunnel) then costs no goroutine of its
// own while it waits. It must be called before the handler returns.
func (w *responseWriter) Detach() (finish func(reset bool)) {
	if w.detached == nil {
		w.detached = &detach{}
	}
	d := w.detached
	return func(reset bool) {
		if !d.claim() {
			return
		}
		if reset {
			w.st.finishReset(http2.ErrCodeInternal)
		} else {
			w.finish()
		}
		w.st.end()
	}
}

// Park keeps the call open after its handler returns (callpark.Parker):
// it is Detach, with the handler chain's end-of-call work (Then) run
// before the stream is finished, and never before the handler returned.
func (w *responseWriter) Park() (end func(reset bool)) {
	if w.parked != nil {
		return nil
	}
	p := &parked{finish: w.Detach()}
	w.parked = p
	return p.end
}

// Then queues f to run when the parked call ends (callpark.Parker); false
// if the call is not parked. Handler goroutine only.
func (w *responseWriter) Then(f func()) bool {
	p := w.parked
	if p == nil {
		return false
	}
	p.mu.Lock()
	p.later = append(p.later, f)
	p.mu.Unlock()
	return true
}

// parked is a parked call's end: it is finished once both its handler
// returned and its end was called, whichever comes last.
type parked struct {
	finish func(reset bool)

	mu       sync.Mutex
	later    []func() // Then's work, in order
	unwound  bool     // the handler returned
	ended    bool     // end was called
	endReset bool
}

// end is Park's end function.
func (p *parked) end(reset bool) {
	p.mu.Lock()
	if p.ended {
		p.mu.Unlock()
		return
	}
	p.ended, p.endReset = true, reset
	run := p.unwound
	p.mu.Unlock()
	if run {
		p.run()
	}
}

// returned records that the handler returned.
func (p *parked) returned() {
	p.mu.Lock()
	p.unwound = true
	run := p.ended
	p.mu.Unlock()
	if run {
		p.run()
	}
}

// run does the queued work and finishes the stream; once, by whichever of
// end and returned came last.
func (p *parked) run() {
	done := false
	defer func() { p.finish(p.endReset || !done) }() // reset if a layer's work panicked
	for _, f := range p.later {
		f()
	}
	p.later = nil
	done = true
}

// finishReset ends the stream with RST_STREAM(code) after a handler panic.
func (st *stream) finishReset(code http2.ErrCode) {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	alive := !st.reset && c.werr == nil && !c.closed
	st.closeBodyLocked()
	// Aborted before it is marked done, so that a write of the handler's
	// still blocked on flow control (in another of its goroutines) wakes
	// and fails.
	c.removeStreamLocked(st, errStreamReset)
	st.done = true
	if alive {
		_ = c.wfr.WriteRSTStream(st.id, code)
		_ = c.flushLocked()
	}
}

// writeErrLocked reports why st can no longer be written, or nil.
func (st *stream) writeErrLocked() error {
	c := st.c
	switch {
	case c.werr != nil:
		return c.werr
	case c.closed:
		return errConnClosed
	case st.reset:
		if st.resetErr != nil {
			return st.resetErr
		}
		return errStreamReset
	case st.done:
		return errHandlerDone
	}
	return nil
}

var errHandlerDone = errors.New("h2front: write after handler returned")
