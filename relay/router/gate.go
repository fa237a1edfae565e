package router

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/internal/grpcerr"
	"github.com/betcode-dev/betcode/shared/callpark"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// CodeRelayDraining is the BetCode error code of a call this replica
// refused or ended because it is draining (a deploy): the client retries at
// once, on a new connection, which lands on another replica; streams resume
// from the last sequence they saw.
const CodeRelayDraining = "RELAY_DRAINING"

// CallKind is what the Gate is asked to admit.
type CallKind int

const (
	// CallUnary is a forwarded unary call: the drain lets it finish.
	CallUnary CallKind = iota
	// CallStream is a forwarded server or client stream: the drain ends it.
	CallStream
	// CallBufferable is a unary call that, refused, is stored in the
	// shared buffer instead (Bufferable).
	CallBufferable
	// CallDelivery is the delivery of one buffered message: the drain
	// lets it finish, and a refused one stays buffered.
	CallDelivery
)

// Gate admits forwarded calls while the replica serves and ends them when
// it drains. relay/server's drain implements it.
type Gate interface {
	// Admit admits a call of the given kind. It returns the context the
	// call runs in, which ends when the drain ends the call (ctx itself
	// for a call the drain lets finish), and done, to call when the call
	// is over. ok is false when the replica drains: the call is refused.
	Admit(ctx context.Context, kind CallKind) (cctx context.Context, done func(), ok bool)
}

// callKind is the kind of the forwarded call to path.
func callKind(path string) CallKind {
	switch {
	case isStream(path):
		return CallStream
	case Bufferable[path]:
		return CallBufferable
	}
	return CallUnary
}

// gated runs a call through rt.Gate: refused while draining (buffered if
// it is bufferable), ended with UNAVAILABLE / RELAY_DRAINING if the drain
// cuts it.
func (rt *Router) gated(ctx context.Context, w http.ResponseWriter, r *http.Request, id auth.Identity) {
	kind := callKind(r.URL.Path)
	cctx, done, ok := rt.Gate.Admit(ctx, kind)
	if !ok {
		if kind == CallBufferable {
			// Stored in the shared buffer: the machine's next replica
			// delivers it.
			rt.route(ctx, w, r, id, true)
			return
		}
		writeStatus(w, codes.Unavailable, CodeRelayDraining, "this relay replica is shutting down; retry at once on a new connection")
		return
	}
	if cctx == ctx { // a unary call: the drain lets it finish
		rt.route(ctx, w, r, id, false)
		callpark.Then(w, done)
		return
	}
	// A stream the drain ended must reach its client now: if its end
	// cannot be written within cutGrace (the client does not read, and the
	// front waits for its window), the stream is reset so that the client
	// resumes elsewhere instead of waiting for the drain's grace.
	finished := make(chan struct{})
	stop := context.AfterFunc(cctx, func() {
		t := time.NewTimer(cutGrace)
		defer t.Stop()
		select {
		case <-finished:
		case <-t.C:
			if ctx.Err() == nil {
				resetStream(w)
			}
		}
	})
	tw := grpcerr.TrackHeaders(w)
	rt.route(cctx, tw, r.WithContext(cctx), id, false)
	// At the call's end, which for a parked stream is later.
	callpark.Then(tw, func() {
		if cctx.Err() != nil && ctx.Err() == nil {
			// The drain ended the call, not its client: say so.
			grpcerr.End(tw, grpcerr.Status(codes.Unavailable, CodeRelayDraining, "this relay replica is shutting down; resume on a new connection", nil))
		}
		stop()
		close(finished)
		done()
	})
}

// cutGrace is how long a stream the drain ended may take to write its end
// before it is reset.
const cutGrace = time.Second

// resetStream resets w's stream if the server can (the relay's front:
// h2front.Resetter), looking through wrappers that Unwrap.
func resetStream(w http.ResponseWriter) {
	for {
		if r, ok := w.(interface{ Reset() }); ok {
			r.Reset()
			return
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}

// admitDelivery admits the delivery of one buffered message.
func (rt *Router) admitDelivery(ctx context.Context) (func(), bool) {
	if rt.Gate == nil {
		return func() {}, true
	}
	_, done, ok := rt.Gate.Admit(ctx, CallDelivery)
	return done, ok
}

// streams caches isStream's answers for known methods: path -> bool.
var streams sync.Map

// isStream reports whether the method at path streams, by the protobuf
// descriptors linked into the relay; an unknown method counts as unary.
func isStream(path string) bool {
	if v, ok := streams.Load(path); ok {
		return v.(bool)
	}
	service, method, ok := tunnel.SplitMethod(path)
	if !ok {
		return false
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(strings.TrimPrefix(service, "/")))
	sd, isService := d.(protoreflect.ServiceDescriptor)
	if err != nil || !isService {
		return false
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return false
	}
	// Only methods linked in are cached: the map stays bounded whatever
	// paths callers send.
	stream := md.IsStreamingClient() || md.IsStreamingServer()
	streams.Store(path, stream)
	return stream
}
