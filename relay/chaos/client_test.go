package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

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
}

type breakRec struct {
	at, resumed time.Time // resumed is zero while not streaming again
	err         string
}

// client is one user with the machines they own, driving turns.
type client struct {
	idx      int
	user     string
	token    string
	cc       *grpc.ClientConn
	machines []*agentProc
	others   []*agentProc // machines of other users, that must refuse this one
	rec      *recorder
	stall    chan time.Duration

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
	ok       bool // accepted or buffered
	err      string
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
	api := pb.NewAgentServiceClient(c.cc)
	// One session per machine, its follower started at once.
	for _, m := range c.machines {
		var sess string
		prompt := "hello"
		if m.real {
			prompt = "STREAM 20"
		}
		err := retry(load, func(ctx context.Context) error {
			resp, err := api.StartSession(onMachine(ctx, m.id), &pb.StartSessionRequest{WorkingDirectory: m.project,
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
		wg.Go(func() { f.run(follow) })
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
		err := retry(qctx, func(ctx context.Context) error {
			resp, err := api.QueueMessage(onMachine(ctx, f.machine.id), &pb.QueueMessageRequest{SessionId: f.session, IdempotencyKey: q.key,
				Message: &pb.UserMessage{Content: content}})
			if err == nil {
				q.buffered = q.buffered || resp.Buffered
				q.dup = q.dup || resp.Duplicate
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
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := pb.NewAgentServiceClient(c.cc).ListSessions(onMachine(cctx, m.id), &pb.ListSessionsRequest{})
	if err == nil {
		c.mu.Lock()
		c.wrongUser = append(c.wrongUser, fmt.Sprintf("user %s listed %d sessions of %s (owned by %s)", c.user, len(resp.Sessions), m.id, m.owner))
		c.mu.Unlock()
	}
}

// run follows the session until ctx ends, resuming from the last sequence
// received.
func (f *follower) run(ctx context.Context) {
	api := pb.NewAgentServiceClient(f.c.cc)
	wait := 50 * time.Millisecond
	for ctx.Err() == nil {
		f.mu.Lock()
		from := f.last
		f.mu.Unlock()
		sctx, cancel := context.WithCancel(ctx)
		md := metadata.AppendToOutgoingContext(onMachine(sctx, f.machine.id), "x-betcode-follow", "true")
		stream, err := api.ResumeSession(md, &pb.ResumeSessionRequest{SessionId: f.session, FromSequence: from})
		if err == nil {
			// No headers and no error: the call ended at once (the
			// machine is offline, say); Recv has its status.
			var md metadata.MD
			if md, err = stream.Header(); err == nil && md == nil {
				_, err = stream.Recv()
			}
		}
		if err == nil {
			f.streaming()
			wait = 50 * time.Millisecond
			err = f.recv(ctx, stream)
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		f.broke(err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		wait = min(2*wait, 500*time.Millisecond)
	}
}

func (f *follower) streaming() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connected = true
	if n := len(f.breaks); n > 0 && f.breaks[n-1].resumed.IsZero() {
		f.breaks[n-1].resumed = time.Now()
	}
}

func (f *follower) broke(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.connected {
		f.connected = false
		f.breaks = append(f.breaks, breakRec{at: time.Now(), err: fmt.Sprint(err)})
	}
}

func (f *follower) recv(ctx context.Context, stream grpc.ServerStreamingClient[pb.AgentEvent]) error {
	for {
		select {
		case d := <-f.c.stall:
			// This client stops reading: the stream's windows fill up and
			// the relay and the agent must cope.
			f.c.rec.mark("client-stall-begin", f.c.idx)
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		default:
		}
		ev, err := stream.Recv()
		if err != nil {
			return err
		}
		now := time.Now()
		if wd := ev.GetSessionInfo().GetWorkingDirectory(); wd != "" && !strings.Contains(wd, f.machine.id) {
			f.mu.Lock()
			f.wrong = append(f.wrong, fmt.Sprintf("session %s on %s: SessionInfo names %s", f.session, f.machine.id, wd))
			f.mu.Unlock()
		}
		if ev.Sequence == 0 {
			continue
		}
		f.c.rec.event(now, now.Sub(ev.GetTimestamp().AsTime()))
		f.mu.Lock()
		if ev.Sequence <= f.last {
			f.dups++
			f.mu.Unlock()
			continue
		}
		f.seqs = append(f.seqs, ev.Sequence)
		f.last = ev.Sequence
		if ev.GetTurnComplete() != nil {
			f.turns++
			select {
			case f.turnCh <- struct{}{}:
			default:
			}
		}
		var perm string
		if p := ev.GetPermissionRequest(); p != nil && !f.answered[p.RequestId] {
			perm = p.RequestId
			f.answered[perm] = true
		}
		f.mu.Unlock()
		if perm != "" {
			go f.answer(ctx, perm)
		}
	}
}

// answer allows a permission request (a phone's notification action).
func (f *follower) answer(ctx context.Context, id string) {
	err := retry(ctx, func(ctx context.Context) error {
		_, err := pb.NewAgentServiceClient(f.c.cc).AnswerPermission(onMachine(ctx, f.machine.id), &pb.AnswerPermissionRequest{SessionId: f.session,
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
