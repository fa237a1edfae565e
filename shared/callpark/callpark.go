// Package callpark lets a long, quiet HTTP call wait without a goroutine
// of its own.
//
// A relayed stream (an end-to-end channel, a Converse waiting for the next
// turn) may stay open for hours with nothing to move. Served the usual
// way, it holds its handler's goroutine, deep in the handler chain, for
// all that time, and the goroutine's stack costs more than the call's
// state. With callpark the code copying the call's bytes parks it instead:
// it asks the server to keep the call open after the handler returns
// (Park), asks its bodies to call back when they have something (Notify),
// and returns; the handler chain unwinds, each layer leaving the work it
// does at a call's end for when the call really ends (Then). A body's
// callback starts a goroutine that moves the bytes and parks again, or
// ends the call.
//
// A server that cannot keep a call open after its handler returns (net/http)
// offers no Parker: the call is then served the usual way, blocking, and
// Then runs its work at once.
package callpark

import "net/http"

// Parker is offered by a ResponseWriter whose server can keep a call open
// after its handler returned (the relay's HTTP/2 front), or by a wrapper
// that unwraps to one.
type Parker interface {
	// Park keeps the call open after its handler returns. The call is
	// over when end is called (with reset: ended with RST_STREAM rather
	// than its trailers), which must happen at the latest once the
	// request's context is done; the work handed to Then runs first, in
	// the order it was handed, and never before the handler has
	// returned. Park returns nil if the call was parked already.
	Park() (end func(reset bool))
	// Then runs f when the parked call ends and reports true, or reports
	// false (f not run) if the call is not parked.
	Then(f func()) bool
}

// Notifier is a body that can call back instead of blocking a reader.
type Notifier interface {
	// Notify arranges for f to run once, on a goroutine of its own, as
	// soon as a Read would not block (bytes arrived, the body ended or
	// failed, or it was closed). It reports false, arranging nothing,
	// if a Read would not block now.
	Notify(f func()) bool
}

// NotifyVia asks r to call f back (Notifier.Notify) if r can, and
// reports false if it cannot or a Read would not block now: a body that
// wraps another passes its callback on with it.
func NotifyVia(r any, f func()) bool {
	nt, ok := r.(Notifier)
	return ok && nt.Notify(f)
}

// Find returns the Parker w is or wraps (through Unwrap, as
// http.ResponseController does), or nil.
func Find(w http.ResponseWriter) Parker {
	for {
		if p, ok := w.(Parker); ok {
			return p
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
}

// Then runs f at the end of the call w answers: when it ends, if the code
// serving it parked it, else now. A layer of a handler chain calls it
// after its next handler returned, with the work it does at a call's end.
func Then(w http.ResponseWriter, f func()) {
	if p := Find(w); p == nil || !p.Then(f) {
		f()
	}
}
