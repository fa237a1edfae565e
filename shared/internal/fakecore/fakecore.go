// Package fakecore is what the project's fake model APIs (fakeapi for
// Anthropic's Messages API, fakeopenai for OpenAI's Responses API) share:
// the loopback listener, the queue of scripted replies, the record of the
// requests received and the waits on it, and the cut-short sleeps of
// delayed and stalled replies.
package fakecore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Core is one fake server's state: requests of type Req, replies of type
// Rep. The zero Core is not ready; use New.
type Core[Req, Rep any] struct {
	// Log receives the server's lines; never nil after New.
	Log *slog.Logger

	done      chan struct{} // closed by Close: stalled and delayed replies give up
	closeOnce sync.Once

	mu       sync.Mutex
	queue    []Rep
	requests []Req
	others   []string
	changed  chan struct{} // closed and replaced whenever requests grows

	// Set by Listen only.
	http *http.Server
	url  string
	serr chan error
}

// New returns a Core logging to log (nil: discard).
func New[Req, Rep any](log *slog.Logger) *Core[Req, Rep] {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Core[Req, Rep]{Log: log, done: make(chan struct{}), changed: make(chan struct{})}
}

// Listen serves h on addr (default "127.0.0.1:0") until Close. what names
// the server in errors and logs ("fake api").
func (c *Core[Req, Rep]) Listen(addr, what string, h http.Handler) error {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s listen on %s: %w", what, addr, err)
	}
	c.url = "http://" + ln.Addr().String()
	c.http = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	c.serr = make(chan error, 1)
	go func() { c.serr <- c.http.Serve(ln) }()
	c.Log.Info(what+" listening", "url", c.url)
	return nil
}

// URL returns the server's root URL, e.g. "http://127.0.0.1:40123"; "" if
// it was not started with Listen.
func (c *Core[Req, Rep]) URL() string { return c.url }

// Close ends stalled and delayed replies, stops the listener and waits
// until the handlers have returned.
func (c *Core[Req, Rep]) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.done)
		if c.http == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err = c.http.Shutdown(ctx); err != nil {
			err = errors.Join(err, c.http.Close())
		}
		if serveErr := <-c.serr; !errors.Is(serveErr, http.ErrServerClosed) {
			err = errors.Join(err, serveErr)
		}
	})
	return err
}

// Enqueue appends replies that the next requests that take a queued reply
// get, one each, before the server's responder is asked again.
func (c *Core[Req, Rep]) Enqueue(replies ...Rep) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = append(c.queue, replies...)
}

// Pending returns how many enqueued replies are still unused.
func (c *Core[Req, Rep]) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// Requests returns every request recorded so far, in order.
func (c *Core[Req, Rep]) Requests() []Req {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Req(nil), c.requests...)
}

// OtherRequests returns "METHOD /path" for every request to another path
// than the API's own (RecordOther).
func (c *Core[Req, Rep]) OtherRequests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.others...)
}

// WaitRequests waits until at least n requests arrived and returns them
// all.
func (c *Core[Req, Rep]) WaitRequests(ctx context.Context, n int) ([]Req, error) {
	reqs, err := c.Wait(ctx, func(reqs []Req) bool { return len(reqs) >= n })
	if err != nil {
		return reqs, fmt.Errorf("wait for %d requests (have %d): %w", n, len(reqs), err)
	}
	return reqs, nil
}

// Wait waits until cond holds for the requests received so far and returns
// them. cond is called without locks held, on a copy.
func (c *Core[Req, Rep]) Wait(ctx context.Context, cond func([]Req) bool) ([]Req, error) {
	for {
		c.mu.Lock()
		reqs := append([]Req(nil), c.requests...)
		changed := c.changed
		c.mu.Unlock()
		if cond(reqs) {
			return reqs, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return reqs, ctx.Err()
		}
	}
}

// Record records the next request: numbered gives it its sequence number
// (from 1) and returns it as recorded. If takeQueued, the first enqueued
// reply is taken for it, when there is one (queued reports so).
func (c *Core[Req, Rep]) Record(numbered func(seq int) Req, takeQueued bool) (reply Rep, queued bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	req := numbered(len(c.requests) + 1)
	if takeQueued && len(c.queue) > 0 {
		reply, queued = c.queue[0], true
		c.queue = c.queue[1:]
	}
	c.requests = append(c.requests, req)
	close(c.changed)
	c.changed = make(chan struct{})
	return reply, queued
}

// RecordOther records (and logs) a request to another path than the API's
// own.
func (c *Core[Req, Rep]) RecordOther(r *http.Request) {
	c.mu.Lock()
	c.others = append(c.others, r.Method+" "+r.URL.Path)
	c.mu.Unlock()
	c.Log.Info("other request", "method", r.Method, "path", r.URL.Path)
}

// Sleep sleeps for d (forever when d < 0) and reports whether it was not
// cut short by the client leaving (ctx) or the server closing.
func (c *Core[Req, Rep]) Sleep(ctx context.Context, d time.Duration) bool {
	if d == 0 {
		return true
	}
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
		return true
	case <-ctx.Done():
	case <-c.done:
	}
	return false
}

// Clip shortens s to n runes for a log line.
func Clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
