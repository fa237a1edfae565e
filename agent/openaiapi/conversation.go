package openaiapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// conversation is one openai-api conversation: a goroutine (run) that
// takes turns one at a time, streams the model's responses, runs its tool
// calls and hands everything to the session through a provider.Stream.
type conversation struct {
	id          string // the conversation id (its resume id)
	client      openai.Client
	model       string
	home        string
	env         []string
	wd          *workdir
	log         *slog.Logger
	retries     int // the SDK's retries of a request
	idleTimeout time.Duration
	maxSteps    int

	out  *outQueue
	ctx  context.Context // the conversation's life; cancelled by Stop and Kill
	stop context.CancelFunc
	done chan struct{} // closed when run has returned
	wake chan struct{} // a turn was queued (capacity 1)

	// hist is owned by run.
	hist *history

	mu      sync.Mutex
	queue   []queuedTurn
	running context.CancelFunc // cancels the running turn; nil when idle
	asks    map[string]chan provider.Answer
	lastErr string // the last API error, for Stderr
}

// queuedTurn is a turn waiting for the one running to end.
type queuedTurn struct {
	turn      provider.Turn
	cancelled bool // interrupted before it started
}

var _ provider.Stream = (*conversation)(nil)

// run takes turns until the conversation is stopped.
func (c *conversation) run() {
	defer close(c.done)
	defer c.out.close()
	defer func() {
		if err := c.wd.close(); err != nil {
			c.log.Warn("openai-api: close working directory", "err", err)
		}
	}()
	for {
		qt, ctx, ok := c.nextTurn()
		if !ok {
			break
		}
		c.runTurn(ctx, qt)
		c.mu.Lock()
		c.running()
		c.running = nil
		c.mu.Unlock()
	}
	// Turns queued when the conversation stopped end as cancelled, so that
	// every turn the session sent gets its TurnComplete.
	c.mu.Lock()
	left := c.queue
	c.queue = nil
	c.mu.Unlock()
	for range left {
		c.out.push(provider.Output{Events: []*pb.AgentEvent{provider.TurnCompleteEvent(stopCancelled),
			provider.StatusEvent(pb.AgentStatus_IDLE, "")}, TurnEnded: true})
	}
}

// nextTurn waits for a queued turn and returns it with its context.
func (c *conversation) nextTurn() (queuedTurn, context.Context, bool) {
	for {
		c.mu.Lock()
		if c.ctx.Err() != nil {
			c.mu.Unlock()
			return queuedTurn{}, nil, false
		}
		if len(c.queue) > 0 {
			qt := c.queue[0]
			c.queue = c.queue[1:]
			ctx, cancel := context.WithCancel(c.ctx)
			c.running = cancel
			c.mu.Unlock()
			return qt, ctx, true
		}
		c.mu.Unlock()
		select {
		case <-c.wake:
		case <-c.ctx.Done():
		}
	}
}

// SendTurn queues a turn; turns run one after the other, each ending with
// its own TurnComplete.
func (c *conversation) SendTurn(t provider.Turn) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return errors.New("openai-api: the conversation has ended")
	}
	c.queue = append(c.queue, queuedTurn{turn: t})
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// InterruptTurn cancels the running turn (its model request and command)
// and the turns queued behind it; each ends with TurnComplete "cancelled".
func (c *conversation) InterruptTurn() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running != nil {
		c.running()
	}
	for i := range c.queue {
		c.queue[i].cancelled = true
	}
	return nil
}

// ForceInterrupt is InterruptTurn: there is no process to signal.
func (c *conversation) ForceInterrupt() error { return c.InterruptTurn() }

// Answer answers the open permission request requestID.
func (c *conversation) Answer(requestID string, a provider.Answer) error {
	c.mu.Lock()
	ch := c.asks[requestID]
	delete(c.asks, requestID)
	c.mu.Unlock()
	if ch == nil {
		return fmt.Errorf("openai-api: no open request %q", requestID)
	}
	ch <- a // buffered: never blocks
	return nil
}

// Stop cancels the running turn and ends the conversation; it returns once
// its commands have been killed and its loop has returned. grace is not
// needed: nothing outlives the cancellation for long.
func (c *conversation) Stop(time.Duration) {
	c.stop()
	<-c.done
}

// Kill ends the conversation without waiting.
func (c *conversation) Kill() error {
	c.stop()
	return nil
}

// Wait waits for the conversation to end; it ends only when stopped, so
// there is no error to report.
func (c *conversation) Wait() error {
	<-c.done
	return nil
}

// Done is closed when the conversation has ended.
func (c *conversation) Done() <-chan struct{} { return c.done }

// Pid is 0: the conversation runs in the agent.
func (c *conversation) Pid() int { return 0 }

// Stderr returns the last API error, for crash reports.
func (c *conversation) Stderr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

// Next returns the next output; false once the conversation has ended.
func (c *conversation) Next() (provider.Output, bool) { return c.out.next() }

// ResumeID is the conversation id, the name of its history under Home.
func (c *conversation) ResumeID() string {
	if c.home == "" {
		return ""
	}
	return c.id
}

// emit queues events.
func (c *conversation) emit(evs ...*pb.AgentEvent) {
	c.out.push(provider.Output{Events: evs})
}
