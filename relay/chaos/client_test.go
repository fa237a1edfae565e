package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// follower follows one session's event stream, resuming by sequence after
// every break, and records what it received.
type follower struct {
	c       *client
	machine *agentProc
	session string

	mu        sync.Mutex
	seqs      []uint64 // sequences received, in order (seq > 0)
	last      uint64
	dups      int // events at or below last
	turns     int // TurnComplete events
	turnCh    chan struct{}
	breaks    []breakRec
	wrong     []string // events that name another machine's directory
	perms     int      // permission prompts answered
	sent      int      // messages queued to it (the client's goroutine only)
	answered  map[string]bool
	connected bool
	browser   bool // followed as a paired browser (runBrowser)
}

// kind names how f follows its session.
func (f *follower) kind() string {
	switch {
	case f.browser:
		return "paired browser, web/1 channel"
	case f.c.dev != nil:
		return "paired CLI, gRPC channel"
	case f.c.web != nil:
		return "web app, relay login"
	}
	return "gRPC, relay login"
}

type breakRec struct {
	at, resumed time.Time // resumed is zero while not streaming again
	err         string
	tries       int       // failed attempts to resume
	lastErr     string    // the last one's error, and how long after the break
	lastTry     time.Time // when the try that resumed began
	lastState   string    // the client's connection then
}

// client is one user with the machines they own, driving turns.
type client struct {
	idx   int
	user  string
	token string
	cc    *grpc.ClientConn
	web   *webDialer // set for a web client (isWeb): it follows over the WebSocket
	dev   *device    // set for a paired device (isPaired): its calls go inside channels
	// channelURL and channelHTTP reach /api/channel, for a paired
	// device's browser followers (runBrowser).
	channelURL  string
	channelHTTP *http.Client
	w           *world
	machines    []*agentProc
	others      []*agentProc // machines of other users, that must refuse this one
	rec         *recorder
	stall       chan time.Duration

	stallMu sync.Mutex
	stalls  []span // when this client actually stopped reading (a stall is taken at its next event, not when the schedule asks)

	mu        sync.Mutex
	followers []*follower
	queued    []queued
	wrongUser []string
	turns     int
}

// queued is one QueueMessage, sent with retries under one idempotency key.
type queued struct {
	f        *follower
	key      string
	content  string
	buffered bool // the relay buffered it (machine offline)
	dup      bool // a retry was answered "duplicate" (an earlier try was taken)
	sealed   int  // tries sent as a sealed envelope (a paired device whose channel would not open)
	ok       bool // accepted or buffered
	err      string
}

// conn is the connection c calls machine m on: a paired device's channel
// connection to m, else the relay login's.
func (c *client) conn(m *agentProc) *grpc.ClientConn {
	if c.dev != nil {
		if cc := c.dev.conn(m.id); cc != nil {
			return cc
		}
	}
	return c.cc
}

func onMachine(ctx context.Context, id string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-betcode-machine-id", id)
}

// retry calls f until it succeeds, fails with a code that retrying cannot
// change, or ctx ends; it waits 100-500 ms between tries.
func retry(ctx context.Context, f func(context.Context) error) error {
	var err error
	for {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err = f(cctx)
		cancel()
		switch status.Code(err) {
		case codes.OK:
			return nil
		case codes.Unavailable, codes.DeadlineExceeded, codes.Internal, codes.Unknown, codes.Aborted, codes.ResourceExhausted, codes.Canceled:
		default:
			return err
		}
		t := time.NewTimer(time.Duration(100+rand.IntN(400)) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// run drives turns on the client's machines until load ends.
func (c *client) run(load, follow context.Context, wg *sync.WaitGroup) {
	r := rand.New(rand.NewPCG(uint64(c.idx), 7))
	// One session per machine, its follower started at once.
	for k, m := range c.machines {
		var sess string
		prompt := "hello"
		if m.real {
			prompt = "STREAM 20"
		}
		err := retry(load, func(ctx context.Context) error {
			resp, err := pb.NewAgentServiceClient(c.conn(m)).StartSession(onMachine(ctx, m.id), &pb.StartSessionRequest{WorkingDirectory: m.project,
				Message: &pb.UserMessage{Content: prompt}, IdempotencyKey: fmt.Sprintf("start-%s-%d", m.id, c.idx)})
			if err == nil {
				sess = resp.GetSession().GetId()
			}
			return err
		})
		if err != nil {
			c.rec.errorf("client %d: start a session on %s: %v", c.idx, m.id, err)
			continue
		}
		f := &follower{c: c, machine: m, session: sess, turnCh: make(chan struct{}, 64), answered: map[string]bool{}}
		c.mu.Lock()
		c.followers = append(c.followers, f)
		c.mu.Unlock()
		switch {
		case c.web != nil:
			wg.Go(func() { f.runWeb(follow) })
		case c.dev != nil && k%2 == 1:
			// Every second machine of a paired device is followed as the
			// phone's web app does, the rest as the CLI.
			f.browser = true
			wg.Go(func() { f.runBrowser(follow) })
		default:
			wg.Go(func() { f.run(follow) })
		}
	}
	c.mu.Lock()
	fs := append([]*follower(nil), c.followers...)
	c.mu.Unlock()
	if len(fs) == 0 {
		return
	}
	for turn := 1; load.Err() == nil; turn++ {
		f := fs[r.IntN(len(fs))]
		f.sent++
		// Unique content per session: the check counts it in the log.
		content := fmt.Sprintf("FLOOD %d", 300+f.sent)
		if f.machine.real {
			switch turn % 3 {
			case 0:
				content = fmt.Sprintf("RUNTOOL please %d", f.sent)
			case 1:
				content = fmt.Sprintf("SLOW please %d", f.sent)
			default:
				content = fmt.Sprintf("STREAM %d", 40+f.sent)
			}
		}
		q := queued{f: f, key: fmt.Sprintf("c%d-t%d", c.idx, turn), content: content}
		f.mu.Lock()
		before := f.turns
		f.mu.Unlock()
		// The client retries its message until it is taken, past the end
		// of the load if need be (the same key: taken once).
		qctx, qcancel := context.WithTimeout(follow, 2*time.Minute)
		if c.dev != nil {
			q.key = sealedKey(q.key)
		}
		err := retry(qctx, func(ctx context.Context) error {
			resp, err := pb.NewAgentServiceClient(c.conn(f.machine)).QueueMessage(onMachine(ctx, f.machine.id), &pb.QueueMessageRequest{SessionId: f.session, IdempotencyKey: q.key,
				Message: &pb.UserMessage{Content: content}})
			if err == nil {
				q.buffered = q.buffered || resp.Buffered
				q.dup = q.dup || resp.Duplicate
				return nil
			}
			if c.dev != nil && status.Code(err) == codes.Unavailable {
				// The channel did not open (the machine may be offline):
				// sealed, under the same key, as betcode send does.
				buffered, dup, serr := c.w.queueSealed(ctx, c.dev, f.machine.id, f.session, q.key, content)
				if serr == nil {
					q.buffered = q.buffered || buffered
					q.dup = q.dup || dup
					q.sealed++
					return nil
				}
			}
			return err
		})
		qcancel()
		q.ok = err == nil
		if err != nil {
			q.err = err.Error()
		}
		c.mu.Lock()
		c.queued = append(c.queued, q)
		c.turns++
		c.mu.Unlock()
		c.probeOthers(load, r)
		if !q.ok {
			continue
		}
		// Wait for the turn (or give up after a while: a turn queued to a
		// machine that is down runs when it is back).
		deadline := time.NewTimer(20 * time.Second)
		for done := false; !done; {
			select {
			case <-f.turnCh:
				f.mu.Lock()
				done = f.turns > before
				f.mu.Unlock()
			case <-deadline.C:
				done = true
			case <-load.Done():
				done = true
			}
		}
		deadline.Stop()
		// A person reads the answer before the next prompt.
		sleepCtx(load, time.Duration(300+r.IntN(1200))*time.Millisecond)
	}
}

// probeOthers calls a machine of another user: the relay must refuse it.
func (c *client) probeOthers(ctx context.Context, r *rand.Rand) {
	if len(c.others) == 0 {
		return
	}
	m := c.others[r.IntN(len(c.others))]
	if c.dev != nil {
		if err := c.w.probeChannel(ctx, c.dev, m); err != nil {
			c.mu.Lock()
			c.wrongUser = append(c.wrongUser, fmt.Sprintf("user %s: %v", c.user, err))
			c.mu.Unlock()
		}
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := pb.NewAgentServiceClient(c.cc).ListSessions(onMachine(cctx, m.id), &pb.ListSessionsRequest{})
	if err == nil {
		c.mu.Lock()
		c.wrongUser = append(c.wrongUser, fmt.Sprintf("user %s listed %d sessions of %s (owned by %s)", c.user, len(resp.Sessions), m.id, m.owner))
		c.mu.Unlock()
	}
}

// run follows the session until ctx ends over gRPC ResumeSession streams,
// resuming from the last sequence received.
func (f *follower) run(ctx context.Context) {
	f.follow(ctx, f.grpcSession, 50*time.Millisecond, 500*time.Millisecond)
}

// follow runs session (one stream or socket, until it fails) again and
// again until ctx ends, recording each break, and waits base doubling to
// most between tries (base again once one streamed: it calls streaming),
// or what the failure asks for (retry_after_ms: the relay's answer for a
// machine moving between replicas), as agent/client and the web app do.
func (f *follower) follow(ctx context.Context, session func(ctx context.Context, streaming func()) error, base, most time.Duration) {
	wait := base
	for ctx.Err() == nil {
		f.trying()
		err := session(ctx, func() {
			f.streaming()
			wait = base
		})
		if ctx.Err() != nil {
			return
		}
		f.broke(err)
		if d, ok := retryAfter(err); ok {
			if !sleepCtx(ctx, d) {
				return
			}
			continue
		}
		if !sleepCtx(ctx, wait) {
			return
		}
		wait = min(2*wait, most)
	}
}

// retryAfter returns the retry_after_ms of err's ErrorInfo, as
// agent/client.RetryAfter reads it (the relay's module cannot import the
// agent's).
func retryAfter(err error) (time.Duration, bool) {
	var h *hinted
	if errors.As(err, &h) {
		return h.after, true
	}
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return 0, false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if ms, perr := strconv.ParseInt(info.GetMetadata()["retry_after_ms"], 10, 64); perr == nil && ms >= 0 {
				return min(time.Duration(ms)*time.Millisecond, 30*time.Second), true
			}
		}
	}
	return 0, false
}

// grpcSession runs one ResumeSession stream from the last sequence
// received until it fails.
func (f *follower) grpcSession(ctx context.Context, streaming func()) error {
	api := pb.NewAgentServiceClient(f.c.conn(f.machine))
	f.mu.Lock()
	from := f.last
	f.mu.Unlock()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	md := metadata.AppendToOutgoingContext(onMachine(sctx, f.machine.id), "x-betcode-follow", "true")
	stream, err := api.ResumeSession(md, &pb.ResumeSessionRequest{SessionId: f.session, FromSequence: from})
	if err != nil {
		return err
	}
	// No headers and no error: the call ended at once (the machine is
	// offline, say); Recv has its status.
	hdr, err := stream.Header()
	if err == nil && hdr == nil {
		_, err = stream.Recv()
	}
	if err != nil {
		return err
	}
	streaming()
	return f.recv(ctx, stream)
}

// stallIfAsked stops reading for as long as a client-stall fault asks, if
// one is waiting: the stream's windows fill up, and the relay and the
// agent must cope.
func (c *client) stallIfAsked(ctx context.Context) {
	select {
	case d := <-c.stall:
		c.rec.mark("client-stall-begin", c.idx)
		began := time.Now()
		sleepCtx(ctx, d)
		c.stallMu.Lock()
		c.stalls = append(c.stalls, span{began, time.Now()})
		c.stallMu.Unlock()
	default:
	}
}

// span is a stretch of wall-clock time.
type span struct{ from, to time.Time }

// stalledDuring says when c stopped reading between from and to, or "".
func (c *client) stalledDuring(from, to time.Time) string {
	c.stallMu.Lock()
	defer c.stallMu.Unlock()
	for _, s := range c.stalls {
		if !s.to.Before(from) && !s.from.After(to) {
			return fmt.Sprintf("its client's stall (%s for %s)", s.from.Format("15:04:05.000"), s.to.Sub(s.from).Round(time.Millisecond))
		}
	}
	return ""
}

func (f *follower) streaming() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connected = true
	if n := len(f.breaks); n > 0 && f.breaks[n-1].resumed.IsZero() {
		f.breaks[n-1].resumed = time.Now()
	}
}

// trying notes when a try to resume begins.
func (f *follower) trying() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.breaks); n > 0 && f.breaks[n-1].resumed.IsZero() {
		f.breaks[n-1].lastTry = time.Now()
		f.breaks[n-1].lastState = f.c.conn(f.machine).GetState().String()
	}
}

func (f *follower) broke(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.connected {
		f.connected = false
		f.breaks = append(f.breaks, breakRec{at: time.Now(), err: fmt.Sprint(err)})
	} else if n := len(f.breaks); n > 0 {
		b := &f.breaks[n-1]
		b.tries++
		b.lastErr = fmt.Sprintf("%v (%s after the break)", err, time.Since(b.at).Round(time.Millisecond))
	}
}

func (f *follower) recv(ctx context.Context, stream grpc.ServerStreamingClient[pb.AgentEvent]) error {
	for {
		f.c.stallIfAsked(ctx)
		ev, err := stream.Recv()
		if err != nil {
			return err
		}
		if ev.Sequence == 0 {
			f.checkDir(ev.GetSessionInfo().GetWorkingDirectory())
			continue
		}
		f.received(ctx, ev.Sequence, ev.GetTimestamp().AsTime(), ev.GetSessionInfo().GetWorkingDirectory(),
			ev.GetTurnComplete() != nil, ev.GetPermissionRequest().GetRequestId())
	}
}

// checkDir records a session working directory that names another machine.
func (f *follower) checkDir(wd string) {
	if wd != "" && !strings.Contains(wd, f.machine.id) {
		f.mu.Lock()
		f.wrong = append(f.wrong, fmt.Sprintf("session %s on %s: its info names %s", f.session, f.machine.id, wd))
		f.mu.Unlock()
	}
}

// received records event seq, sent at ts, as the client got it (a repeat
// counts as doubled), counts a turn's end and answers a permission prompt
// (perm, its request id).
func (f *follower) received(ctx context.Context, seq uint64, ts time.Time, wd string, turnComplete bool, perm string) {
	now := time.Now()
	if !ts.IsZero() {
		f.c.rec.event(now, now.Sub(ts))
	}
	f.checkDir(wd)
	f.mu.Lock()
	if seq <= f.last {
		f.dups++
		f.mu.Unlock()
		return
	}
	f.seqs = append(f.seqs, seq)
	f.last = seq
	if turnComplete {
		f.turns++
		select {
		case f.turnCh <- struct{}{}:
		default:
		}
	}
	if perm != "" && f.answered[perm] {
		perm = ""
	} else if perm != "" {
		f.answered[perm] = true
	}
	f.mu.Unlock()
	if perm != "" {
		go f.answer(ctx, perm)
	}
}

// answer allows a permission request (a phone's notification action).
func (f *follower) answer(ctx context.Context, id string) {
	err := retry(ctx, func(ctx context.Context) error {
		_, err := pb.NewAgentServiceClient(f.c.conn(f.machine)).AnswerPermission(onMachine(ctx, f.machine.id), &pb.AnswerPermissionRequest{SessionId: f.session,
			Response: &pb.PermissionResponse{RequestId: id, Decision: pb.PermissionDecision_ALLOW_ONCE}})
		if status.Code(err) == codes.FailedPrecondition && strings.Contains(fmt.Sprint(err), "NOT_PENDING") {
			return nil // answered by an earlier try whose reply was lost
		}
		return err
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		f.perms++
	} else if ctx.Err() == nil {
		f.c.rec.errorf("answer permission %s of %s: %v", id, f.session, err)
	}
}
