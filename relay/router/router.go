// Package router is the relay's front door: every client call arrives here.
// Calls for the relay's own services (MachineService, TunnelService, health)
// go to its grpc.Server; every other call is forwarded, byte for byte, to
// the user's current machine (or the one named in x-betcode-machine-id)
// through that machine's tunnel. A call for an offline machine fails fast
// with UNAVAILABLE / MACHINE_OFFLINE unless it is bufferable.
package router

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/internal/grpcerr"
	"github.com/betcode-dev/betcode/relay/limits"
	"github.com/betcode-dev/betcode/relay/peer"
	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/callpark"
	"github.com/betcode-dev/betcode/shared/h2client"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// MachineHeader names the machine for one call, overriding the current one.
const MachineHeader = "X-Betcode-Machine-Id"

// ErrorDomain is the ErrorInfo domain of BetCode error codes.
const ErrorDomain = grpcerr.Domain

// Bufferable calls may wait in the relay while their machine is offline:
// unary, carrying an idempotency key and meaningful later. QueueMessage,
// and ChannelService.Deliver (a sealed envelope, which the relay stores
// as the ciphertext it is). Streams (Converse, ResumeSession) need a live
// machine.
var Bufferable = map[string]bool{
	queueMessagePath: true,
	deliverPath:      true,
}

const (
	queueMessagePath = "/betcode.v1.AgentService/QueueMessage"
	deliverPath      = "/betcode.v1.ChannelService/Deliver"
	pairPath         = "/betcode.v1.ChannelService/Pair"
)

// bufferedCall reads what the buffer needs of a bufferable request: its
// idempotency key, and the answer that says it was buffered.
func bufferedCall(path string, msg []byte, dup bool) (key string, answer proto.Message, err error) {
	switch path {
	case deliverPath:
		var req pb.DeliverRequest
		if err := proto.Unmarshal(msg, &req); err != nil {
			return "", nil, fmt.Errorf("decode DeliverRequest: %w", err)
		}
		// The outer key: the envelope's own id is sealed inside it.
		return req.IdempotencyKey, &pb.DeliverResponse{Buffered: true}, nil
	default:
		var req pb.QueueMessageRequest
		if err := proto.Unmarshal(msg, &req); err != nil {
			return "", nil, fmt.Errorf("decode QueueMessageRequest: %w", err)
		}
		return req.IdempotencyKey, &pb.QueueMessageResponse{Buffered: true, Duplicate: dup}, nil
	}
}

// relayServices are served by the relay itself.
var relayServices = map[string]bool{
	"betcode.v1.MachineService":           true,
	"betcode.v1.AdminService":             true,
	"betcode.v1.EnrollService":            true,
	"betcode.v1.OIDCService":              true,
	"betcode.v1.TunnelService":            true,
	"grpc.health.v1.Health":               true,
	"betcode.v1.BetCodeHealth":            true,
	"grpc.reflection.v1.ServerReflection": true,
}

// Authorizer decides which machines a user may reach.
type Authorizer interface {
	// CanReach reports whether userID may use a machine owned by user
	// owner or, when team is set, by team.
	CanReach(ctx context.Context, userID, owner, team string) (bool, error)
	// Audit records a security event.
	Audit(e store.AuditEvent)
}

// ShareChecker is what an Authorizer may also answer (the relay's auth.Authenticator
// does): whether userID holds a live share of machineID (a token of scope
// store.ScopeShare that the machine asked for, for that user). The router
// then admits the user's own ChannelService.Pair call to the machine (the
// share code's pairing) though the machine is not theirs.
type ShareChecker interface {
	SharedWith(ctx context.Context, userID, machineID string) (bool, error)
}

// StreamLimiter caps the calls open at once per token and per machine.
type StreamLimiter interface {
	// AcquireStream admits one more call of tokenID to machineID, or
	// answers it RESOURCE_EXHAUSTED itself and reports false.
	AcquireStream(w http.ResponseWriter, r *http.Request, tokenID, machineID string) (release func(), ok bool)
}

// Router routes calls.
type Router struct {
	Local http.Handler // the relay's own grpc.Server
	Auth  Authorizer
	// Streams, if set, caps concurrent calls per token and per tunnel.
	Streams StreamLimiter
	// MaxMessageBytes, if set, bounds each request message of a forwarded
	// call: a larger one ends the call RESOURCE_EXHAUSTED /
	// MESSAGE_TOO_LARGE as soon as its frame header announces it.
	MaxMessageBytes int
	Registry        *registry.Registry
	Store           store.Store
	Limits          store.Limits
	Log             *slog.Logger
	Metrics         *Metrics
	// Tracing, if set, gives every forwarded call a server span (trace.go)
	// whose traceparent the agent receives.
	Tracing Tracing
	// Self is this replica's advertised address; empty means a single
	// replica, which never forwards to peers.
	Self string
	// Peers carries calls to the replica holding a machine's tunnel; nil
	// disables forwarding.
	Peers *peer.Forwarder
	// PresenceTTL is how long a machine's recorded replica stays live
	// after its last heartbeat (store.Machine.LiveReplica).
	PresenceTTL time.Duration
	// Gate, if set, admits forwarded calls and ends them when the replica
	// drains (relay/server's drain); nil admits every call.
	Gate Gate
	// RetryFirst is the first wait before a delivery tries a failed store
	// call again (default 100 ms; retryStore).
	RetryFirst time.Duration

	nextID     atomic.Uint64
	deliveries sync.Map // machine id -> *sync.Mutex: one delivery at a time
	current    sync.Map // user id -> currentEntry
	machines   sync.Map // machine id -> machineEntry: records of machines not on this replica
}

// currentTTL is how long the router trusts its copy of a user's current
// machine. SwitchMachine through this replica takes effect at once; one made
// through another replica within currentTTL.
const currentTTL = 2 * time.Second

const switchMachinePath = "/betcode.v1.MachineService/SwitchMachine"

type currentEntry struct {
	machine string
	at      time.Time
}

// machineTTL is how long the router trusts its copy of the record of a
// machine whose tunnel is not on this replica: calls for it (handed to
// the replica holding it, or buffered) then cost no store round trip each,
// which was most of what the hop between replicas added (docs/relay.md,
// several replicas). A machine revoked, or moved to another replica,
// through another replica is seen here within machineTTL; a replica that
// cannot be reached drops the copy at once.
const machineTTL = time.Second

// awayTTL is how long the router trusts a record that names no other live
// replica (the machine offline, or recorded here though its tunnel is
// not): such a record is what a machine between replicas leaves for a
// moment (a drain closed its tunnel before the agent registered again),
// and trusting it for machineTTL answered MACHINE_OFFLINE for up to a
// second to a client that had found the machine back (the chaos soak's
// drains: streams back after 1.3-1.6 s instead of 0.2-0.7 s).
const awayTTL = 100 * time.Millisecond

type machineEntry struct {
	m  store.Machine
	at time.Time
}

// trustedFor is how long the router trusts m, read at now.
func (rt *Router) trustedFor(m *store.Machine, now time.Time) time.Duration {
	if addr := m.LiveReplica(now, rt.PresenceTTL); addr != "" && addr != rt.Self {
		return machineTTL
	}
	return awayTTL
}

// ForgetMachine drops the router's copy of machine id's record: the store
// announced a change (a revocation, a deletion, a new owner), which the
// next call must see.
func (rt *Router) ForgetMachine(id string) { rt.machines.Delete(id) }

// machine returns machine id's record, from the store at most every
// machineTTL (awayTTL while it names no other live replica).
func (rt *Router) machine(ctx context.Context, id string) (store.Machine, error) {
	if v, ok := rt.machines.Load(id); ok {
		e := v.(machineEntry)
		if now := time.Now(); now.Sub(e.at) < rt.trustedFor(&e.m, now) {
			return e.m, nil
		}
	}
	m, err := rt.Store.GetMachine(ctx, id)
	if err != nil {
		rt.machines.Delete(id)
		return m, err
	}
	rt.machines.Store(id, machineEntry{m: m, at: time.Now()})
	return m, nil
}

// currentMachine returns the user's current machine, from the store at
// most every currentTTL: a call then costs no store round trip.
func (rt *Router) currentMachine(ctx context.Context, userID string) (string, error) {
	if e, ok := rt.current.Load(userID); ok && time.Since(e.(currentEntry).at) < currentTTL {
		return e.(currentEntry).machine, nil
	}
	cur, err := rt.Store.CurrentMachine(ctx, userID)
	if err != nil {
		return "", err
	}
	rt.current.Store(userID, currentEntry{machine: cur, at: time.Now()})
	return cur, nil
}

// ServeHTTP routes one call.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 2 || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
		http.Error(w, "this is a gRPC endpoint (HTTP/2, application/grpc)", http.StatusUnsupportedMediaType)
		return
	}
	service, _, ok := tunnel.SplitMethod(r.URL.Path)
	if !ok {
		writeStatus(w, codes.Unimplemented, "", "malformed method "+r.URL.Path)
		return
	}
	ctx := r.Context()
	id, _ := auth.FromContext(ctx)
	if id.UserID == "" && !relayServices[service] {
		writeStatus(w, codes.Unauthenticated, "", "this call needs a token (betcode login)")
		return
	}
	if relayServices[service] {
		rt.Local.ServeHTTP(w, r)
		if r.URL.Path == switchMachinePath {
			rt.current.Delete(id.UserID)
		}
		return
	}
	if rt.Gate != nil {
		rt.gated(ctx, w, r, id)
		return
	}
	rt.route(ctx, w, r, id, false)
}

// route sends an authenticated call to its machine: through the tunnel
// here, through the replica holding it, or (always, when bufferOnly) to
// the buffer.
func (rt *Router) route(ctx context.Context, w http.ResponseWriter, r *http.Request, id auth.Identity, bufferOnly bool) {
	machineID := r.Header.Get(MachineHeader)
	if id.ScopeMachine != "" {
		// A scoped token (auth/scope.go) reaches its own machine, by
		// default too; any other does not exist for it.
		if machineID == "" {
			machineID = id.ScopeMachine
		}
		if machineID != id.ScopeMachine {
			rt.notFound(w, r, id, machineID, "the token is scoped to machine "+id.ScopeMachine)
			return
		}
	}
	if machineID == "" {
		cur, err := rt.currentMachine(ctx, id.UserID)
		if err != nil {
			writeStatus(w, codes.Internal, "", "look up current machine: "+err.Error())
			return
		}
		if cur == "" {
			writeStatus(w, codes.FailedPrecondition, "NO_MACHINE_SELECTED", "no machine selected: switch to one (betcode machine switch ID) or name it per call (--machine ID)")
			return
		}
		machineID = cur
	}
	t := rt.Registry.Get(machineID)
	if t != nil {
		// Connected: the registry knows the owner, so the store is
		// skipped on the hot path.
		if !rt.authorized(ctx, w, r, id, machineID, t.OwnerID, t.TeamID) {
			return
		}
		if bufferOnly {
			rt.offline(w, r, id.UserID, machineID, false)
			return
		}
		rt.forward(ctx, w, r, t, id.UserID, machineID)
		return
	}
	m, err := rt.machine(ctx, machineID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		writeStatus(w, codes.Internal, "", "look up machine: "+err.Error())
		return
	}
	if err != nil || !m.RevokedAt.IsZero() {
		rt.notFound(w, r, id, machineID, "no such machine")
		return
	}
	if !rt.authorized(ctx, w, r, id, machineID, m.OwnerID, m.TeamID) {
		return
	}
	t = rt.Registry.Get(machineID)
	if t == nil || bufferOnly {
		if addr := rt.peerFor(&m, id); addr != "" && !bufferOnly {
			rt.toPeer(ctx, w, r, addr, id.UserID, machineID, m.LastSeen)
			return
		}
		rt.offline(w, r, id.UserID, machineID, moving(m.LastSeen))
		return
	}
	rt.forward(ctx, w, r, t, id.UserID, machineID)
}

// authorized reports whether the caller may reach the machine; if not, it
// answers NOT_FOUND (another user's machine does not exist for the caller)
// and audits the attempt.
func (rt *Router) authorized(ctx context.Context, w http.ResponseWriter, r *http.Request, id auth.Identity, machineID, owner, team string) bool {
	if id.Scope == store.ScopeShare && id.ScopeMachine == machineID {
		// A teammate's share credential: the machine itself asked for it
		// for this user (tunnelsvc.IssueDeviceToken), and the scope lets it
		// open end-to-end channels only, which the machine admits only
		// for the device that paired with the share's code.
		auth.Machine(ctx, machineID)
		return true
	}
	ok, err := rt.Auth.CanReach(ctx, id.UserID, owner, team)
	if err == nil && !ok && id.Scope == "" && r.URL.Path == pairPath {
		if sc, is := rt.Auth.(ShareChecker); is {
			ok, err = sc.SharedWith(ctx, id.UserID, machineID)
		}
	}
	if err != nil {
		writeStatus(w, codes.Unavailable, "", "cannot check access to the machine now; retry")
		return false
	}
	if !ok {
		rt.notFound(w, r, id, machineID, "not the caller's machine")
		return false
	}
	auth.Machine(ctx, machineID)
	return true
}

// notFound answers a call for a machine the caller may not see exactly as
// one for a machine that does not exist, and audits it.
func (rt *Router) notFound(w http.ResponseWriter, r *http.Request, id auth.Identity, machineID, why string) {
	rt.Auth.Audit(store.AuditEvent{Actor: id.UserID, Action: "access.denied", Target: "machine:" + machineID,
		Remote: id.Remote, Outcome: "denied", Detail: why + "; " + r.URL.Path})
	writeStatus(w, codes.NotFound, "MACHINE_NOT_FOUND", fmt.Sprintf("no machine %q", machineID))
}

func (rt *Router) forward(ctx context.Context, w http.ResponseWriter, r *http.Request, t *registry.Tunnel, userID, machineID string) {
	if t.Client.Closed() {
		rt.offline(w, r, userID, machineID, true) // its tunnel has just ended
		return
	}
	release := func() {}
	if rt.Streams != nil {
		id, _ := auth.FromContext(ctx)
		var ok bool
		if release, ok = rt.Streams.AcquireStream(w, r, id.TokenID, machineID); !ok {
			return
		}
	}
	rt.limitMessages(ctx, r)
	reqID := strconv.FormatUint(rt.nextID.Add(1), 10)
	headers := http.Header{auth.UserHeader: {userID}, MachineHeader: {machineID}}
	ctx, span := rt.startSpan(ctx, r, machineID, headers)
	call := rt.Metrics.call(r.URL.Path, time.Now())
	err := t.Client.Forward(ctx, call.wrap(w, r), r, reqID, headers)
	// At the call's end, which for a parked stream (tunnel.Forward
	// returned with the call still open, err nil) is later. The work
	// holds the method, not r: a parked call keeps no copy of the request.
	method := r.URL.Path
	callpark.Then(w, func() {
		call.done(w.Header())
		span.end(w.Header())
		release()
		if err != nil && ctx.Err() == nil {
			rt.Log.DebugContext(ctx, "router: forwarded call failed", "machine_id", machineID, "method", method, "err", err)
		} else if rt.Log.Enabled(ctx, slog.LevelDebug) {
			rt.Log.DebugContext(ctx, "router: forwarded call", "machine_id", machineID, "method", method)
		}
	})
}

// peerFor returns the other replica that holds m's tunnel, or "" when the
// call is to be answered here: forwarding is off, no live replica holds
// the machine, the record names this replica (whose tunnel just ended), or
// the call was already forwarded once (a replica never forwards a
// forwarded call, so records that disagree cannot make a loop).
func (rt *Router) peerFor(m *store.Machine, id auth.Identity) string {
	if rt.Peers == nil || rt.Self == "" || id.ForwardedBy != "" {
		return ""
	}
	addr := m.LiveReplica(time.Now(), rt.PresenceTTL)
	if addr == rt.Self {
		return ""
	}
	return addr
}

// limitMessages bounds the size of r's request messages.
func (rt *Router) limitMessages(ctx context.Context, r *http.Request) {
	if rt.MaxMessageBytes <= 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	body := limits.MessageLimitReader(r.Body, rt.MaxMessageBytes)
	body.OnTooLarge = func(err error) {
		auth.End(ctx, codes.ResourceExhausted, limits.CodeMessageTooLarge, err.Error())
	}
	r.Body = body
}

// toPeer hands the call to the replica at addr, which holds the machine's
// tunnel. If that replica cannot be reached the machine counts as offline
// here: the call fails with MACHINE_OFFLINE or, if bufferable, is buffered
// (its body is read first so that it can be).
func (rt *Router) toPeer(ctx context.Context, w http.ResponseWriter, r *http.Request, addr, userID, machineID string, seen time.Time) {
	var body []byte
	if Bufferable[r.URL.Path] {
		var ok bool
		if body, ok = readRequest(w, r); !ok {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	id, _ := auth.FromContext(ctx)
	headers := rt.peerHeaders(id, userID, machineID)
	rt.Metrics.toPeer()
	rt.limitMessages(ctx, r)
	// A RoundTripper closes the request body even when its dial failed,
	// as its contract says; the body must then still be readable for the
	// replica the machine moved to. Without this, a stream's request went
	// on as an empty one (a closed server body reports nothing buffered
	// and ended) and the agent answered INTERNAL "cardinality violation:
	// received no request message" (the chaos soak's retried
	// ResumeSessions).
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &unreadBody{ReadCloser: r.Body}
	}
	rerouted := false
	var unreached func(err error) bool
	unreached = func(err error) bool {
		rt.machines.Delete(machineID) // the next call reads where it is now
		if body != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		// The record may be stale: the replica died and the machine has
		// already registered with another (its agent redials within
		// 250 ms). Read it again, once, and follow it: buffering a message
		// here for a machine that is online there would leave it waiting
		// for that replica's next heartbeat. A request body is sent again
		// only if nothing of it went out (held in memory, or the dial
		// failed).
		if !rerouted && (body != nil || dialFailed(err)) {
			rerouted = true
			if t := rt.Registry.Get(machineID); t != nil {
				rt.forward(ctx, w, r, t, userID, machineID) // it came back here
				return true
			}
			if m, gerr := rt.Store.GetMachine(ctx, machineID); gerr == nil {
				if next := rt.peerFor(&m, id); next != "" && next != addr {
					rt.Log.Info("router: the replica holding the machine cannot be reached; the machine is now on another",
						"machine_id", machineID, "replica", addr, "now", next, "err", err)
					addr = next
					if ferr := rt.Peers.Forward(ctx, next, w, r, headers, unreached); ferr != nil && ctx.Err() == nil {
						rt.Log.DebugContext(ctx, "router: call forwarded to a replica failed", "machine_id", machineID, "replica", next, "err", ferr)
					}
					return true
				}
			}
		}
		rt.Log.Warn("router: the replica holding the machine cannot be reached; treating it as offline",
			"machine_id", machineID, "replica", addr, "err", err)
		rt.offline(w, r, userID, machineID, moving(seen))
		return true
	}
	ctx, span := rt.startSpan(ctx, r, machineID, headers)
	err := rt.Peers.Forward(ctx, addr, w, r, headers, unreached)
	method := r.URL.Path
	callpark.Then(w, func() { // at the call's end (see forward)
		span.end(w.Header())
		if err != nil && ctx.Err() == nil {
			rt.Log.DebugContext(ctx, "router: call forwarded to a replica failed", "machine_id", machineID, "replica", addr, "method", method, "err", err)
		}
	})
}

// unreadBody is a request body that a call which never read it cannot
// close: Close passes through only once Read was called. The server closes
// the body when the handler returns, so an unread body is not left open.
type unreadBody struct {
	io.ReadCloser
	read atomic.Bool
}

func (b *unreadBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.ReadCloser.Read(p)
}

// Close closes the body if it was read from.
func (b *unreadBody) Close() error {
	if !b.read.Load() {
		return nil
	}
	return b.ReadCloser.Close()
}

// Buffered passes on what the body can say without blocking, so that a
// whole request still leaves with its headers.
func (b *unreadBody) Buffered() (n int, ended bool) {
	if bb, ok := b.ReadCloser.(h2client.Buffered); ok {
		return bb.Buffered()
	}
	return 0, false
}

// Notify passes the body's callback on (callpark.Notifier).
func (b *unreadBody) Notify(f func()) bool {
	return callpark.NotifyVia(b.ReadCloser, f)
}

// movingFor is how long after a machine was last seen a call that finds
// it unreachable is told to try again soon (movingRetry): its tunnel has
// just ended (its replica drains or died, the connection broke), and its
// agent is registering with a replica again, which takes about a second
// when many move at once. A client on its usual schedule (100 ms doubling)
// found it up to half a second after it was back.
const movingFor = 10 * time.Second

// movingRetry is the retry_after_ms a call for a moving machine is
// answered with.
const movingRetry = "100"

// moving reports whether a machine last seen at seen is likely moving
// between replicas (movingFor).
func moving(seen time.Time) bool { return time.Since(seen) < movingFor }

// offline answers a call for a machine without a tunnel. A stream for a
// machine that is moving (moving) is told to try again in 100 ms.
func (rt *Router) offline(w http.ResponseWriter, r *http.Request, userID, machineID string, moving bool) {
	if !Bufferable[r.URL.Path] {
		rt.Metrics.offline()
		var md map[string]string
		if moving {
			md = map[string]string{limits.RetryAfterKey: movingRetry}
		}
		grpcerr.Write(w, codes.Unavailable, "MACHINE_OFFLINE", fmt.Sprintf("Target machine %q is not connected; streams need it online (QueueMessage can be buffered)", machineID), md)
		return
	}
	body, ok := readRequest(w, r)
	if !ok {
		return
	}
	msg, err := tunnel.Unframe(body)
	if err != nil {
		writeStatus(w, codes.InvalidArgument, "", err.Error())
		return
	}
	key, _, err := bufferedCall(r.URL.Path, msg, false)
	if err != nil {
		writeStatus(w, codes.InvalidArgument, "", err.Error())
		return
	}
	if key == "" {
		writeStatus(w, codes.InvalidArgument, "", "idempotency_key is required to buffer a message for an offline machine")
		return
	}
	service, method, _ := tunnel.SplitMethod(r.URL.Path)
	id, dup, err := rt.Store.Enqueue(r.Context(), store.Message{
		MachineID: machineID, OwnerID: userID, IdempotencyKey: key,
		Service: service, Method: method, Payload: msg,
	}, rt.Limits)
	if errors.Is(err, store.ErrBufferFull) {
		writeStatus(w, codes.ResourceExhausted, "BUFFER_FULL", err.Error())
		return
	}
	if err != nil {
		writeStatus(w, codes.Internal, "", "buffer message: "+err.Error())
		return
	}
	rt.Metrics.buffered()
	rt.Log.Info("router: buffered a message for an offline machine", "machine_id", machineID, "buffer_id", id, "duplicate", dup)
	if t := rt.Registry.Get(machineID); t != nil {
		// The machine came back while this was being stored.
		go rt.Deliver(context.WithoutCancel(r.Context()), t)
	} else {
		// Taken now: the server may reuse r once this handler returns.
		id, _ := auth.FromContext(r.Context())
		copyReq := r.Clone(context.WithoutCancel(r.Context()))
		copyReq.Body = io.NopCloser(bytes.NewReader(tunnel.Frame(msg)))
		go rt.nudge(copyReq, id, userID, machineID)
	}
	_, answer, _ := bufferedCall(r.URL.Path, msg, dup)
	resp, _ := proto.Marshal(answer)
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status")
	w.WriteHeader(http.StatusOK)
	w.Write(tunnel.Frame(resp))
	w.Header().Set("Grpc-Status", "0")
}

// dialFailed reports whether err is a failure to connect: nothing of the
// call was sent.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// peerHeaders are the headers of a call this replica forwards to a peer:
// the user, this replica, the machine and, for a scoped token, its scope,
// which the replica holding the machine checks again.
func (rt *Router) peerHeaders(id auth.Identity, userID, machineID string) http.Header {
	headers := http.Header{auth.UserHeader: {userID}, auth.ForwardedByHeader: {rt.Self}, MachineHeader: {machineID}}
	if id.Scope != "" {
		for k, v := range auth.ForwardHeaders(id) {
			headers[k] = v
		}
	}
	return headers
}

// nudge sends a copy of a call just buffered here to the replica that now
// holds the machine's tunnel, if another does: the machine may have
// registered there while this replica stored the call (its replica died,
// or this one drains and buffers every bufferable call), after that
// replica read the buffer, and the stored copy would wait for its next
// heartbeat. The copy carries the same idempotency key, so the machine
// takes the message once, and the stored copy, delivered later, is
// answered "duplicate" and removed. The copy's answer is dropped: the
// client was answered "buffered".
func (rt *Router) nudge(r *http.Request, id auth.Identity, userID, machineID string) {
	if rt.Peers == nil || rt.Self == "" {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), nudgeTimeout)
	defer cancel()
	m, err := rt.Store.GetMachine(ctx, machineID)
	if err != nil {
		return
	}
	addr := rt.peerFor(&m, id)
	if addr == "" {
		return
	}
	w := &dropWriter{h: http.Header{}}
	if err := rt.Peers.Forward(ctx, addr, w, r.WithContext(ctx), rt.peerHeaders(id, userID, machineID), func(error) bool { return true }); err != nil {
		rt.Log.Debug("router: copy of a buffered call to the machine's replica failed; the buffer keeps it", "machine_id", machineID, "replica", addr, "err", err)
		return
	}
	rt.Log.Info("router: buffered call sent on to the machine's replica", "machine_id", machineID, "replica", addr, "grpc_status", w.h.Get("Grpc-Status"))
}

// nudgeTimeout bounds nudge.
const nudgeTimeout = 30 * time.Second

// dropWriter is a ResponseWriter that keeps the headers and drops the body.
type dropWriter struct{ h http.Header }

func (w *dropWriter) Header() http.Header         { return w.h }
func (w *dropWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *dropWriter) WriteHeader(int)             {}
func (w *dropWriter) Flush()                      {}

// readRequest reads the body of a bufferable call (at most one 16 MiB
// message and its frame header); if that fails it answers the call and
// reports false.
func readRequest(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20+5))
	if err != nil {
		writeStatus(w, codes.Canceled, "", "read request: "+err.Error())
		return nil, false
	}
	return body, true
}

// writeStatus answers with a gRPC status and, when betcode is set, an
// ErrorInfo detail carrying the BetCode error code.
func writeStatus(w http.ResponseWriter, c codes.Code, betcode, msg string) {
	grpcerr.Write(w, c, betcode, msg, nil)
}

// storeRetryFor bounds how long a delivery retries a store that fails:
// about a heartbeat interval, after which the machine's next heartbeat
// starts a delivery again.
const storeRetryFor = 30 * time.Second

// retryStore runs op until it succeeds, ctx ends or storeRetryFor has
// passed, waiting 100 ms (RetryFirst) growing to 2 s between tries: a
// store that fails for a moment (PostgreSQL restarting) must not leave a
// machine's buffered messages until its next heartbeat (the chaos soak
// found messages that waited so). The first failure and the last are
// logged.
func (rt *Router) retryStore(ctx context.Context, what, machineID string, op func() error) error {
	failed := false
	tries, err := store.Retry(ctx, store.RetryPolicy{First: cmp.Or(rt.RetryFirst, 100*time.Millisecond), Max: 2 * time.Second, For: storeRetryFor}, func() error {
		err := op()
		if err != nil && !failed && !store.Answer(err) {
			failed = true
			rt.Log.Warn("router: "+what+"; retrying", "machine_id", machineID, "err", err)
		}
		return err
	})
	switch {
	case err != nil && ctx.Err() == nil:
		rt.Log.Warn("router: "+what+"; giving up until the machine's next heartbeat", "machine_id", machineID, "tries", tries, "err", err)
	case err == nil && tries > 1:
		rt.Log.Info("router: "+what+": the store answered again", "machine_id", machineID, "tries", tries)
	}
	return err
}

// Deliver sends a machine's buffered requests through its new tunnel, in
// order, one at a time. A message is deleted once the agent answered it
// (whatever the answer: the agent's idempotency check makes a repeat
// harmless); if the tunnel breaks, the rest waits for the next connection.
func (rt *Router) Deliver(ctx context.Context, t *registry.Tunnel) {
	mu, _ := rt.deliveries.LoadOrStore(t.MachineID, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	var after int64
	for ctx.Err() == nil {
		var msgs []store.Message
		err := rt.retryStore(ctx, "read buffered messages", t.MachineID, func() (err error) {
			msgs, err = rt.Store.Pending(ctx, t.MachineID, after, 100)
			return err
		})
		if err != nil {
			return
		}
		if len(msgs) == 0 {
			return
		}
		for _, m := range msgs {
			done, ok := rt.admitDelivery(ctx)
			if !ok {
				// The machine's next replica delivers the rest.
				rt.Log.Info("router: replica draining; delivery stops", "machine_id", t.MachineID)
				return
			}
			md := http.Header{auth.UserHeader: {m.OwnerID}, MachineHeader: {m.MachineID}, "X-Betcode-Buffered": {"true"}}
			for k, v := range m.Metadata {
				md.Set(k, v)
			}
			res, err := t.Client.Invoke(ctx, "buffer-"+strconv.FormatInt(m.ID, 10), m.Service, m.Method, md, m.Payload)
			if err == nil {
				err = rt.retryStore(ctx, "ack buffered message", t.MachineID, func() error {
					return rt.Store.Ack(context.WithoutCancel(ctx), t.MachineID, m.ID)
				})
				if err != nil {
					// Left buffered: the next delivery sends it again,
					// and the agent's idempotency check takes it once.
					done()
					return
				}
			}
			done()
			if err != nil {
				rt.Log.Info("router: tunnel broke while delivering; the rest waits", "machine_id", t.MachineID, "err", err)
				return
			}
			if res.Code != 0 {
				rt.Log.Warn("router: buffered request refused by the machine; dropping it", "machine_id", t.MachineID,
					"buffer_id", m.ID, "code", codes.Code(res.Code).String(), "message", res.Message)
			}
			rt.Metrics.delivered()
			after = m.ID
		}
	}
}
