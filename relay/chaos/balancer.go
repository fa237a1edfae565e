package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Balancer is a small TCP load balancer: it hands each new connection to
// the next backend in turn that is up, and when a backend dies (a health
// check fails) it closes every connection to it at once, as a cloud load
// balancer does for a dead target, so that clients reconnect to another.
// A backend marked draining gets no new connections but keeps its own.
//
// A backend with a readiness URL is checked there (as a Kubernetes
// readiness probe): 200 is up, another status draining, no answer down.
// One without is checked by a TCP connection.
type Balancer struct {
	ln       net.Listener
	backends []*backend
	interval time.Duration
	log      *slog.Logger

	mu   sync.Mutex
	next int

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Target is one backend: its address and, optionally, its readiness URL.
type Target struct {
	Addr  string
	Ready string
}

type backend struct {
	addr  string
	ready string

	mu       sync.Mutex
	up       bool
	draining bool
	conns    map[net.Conn]net.Conn // client side -> backend side
}

// NewBalancer listens on 127.0.0.1 (a free port) in front of targets and
// checks each every interval. Close stops it.
func NewBalancer(targets []Target, interval time.Duration, log *slog.Logger) (*Balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("balancer: listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Balancer{ln: ln, interval: interval, log: log, cancel: cancel}
	for _, t := range targets {
		b.backends = append(b.backends, &backend{addr: t.Addr, ready: t.Ready, up: true, conns: map[net.Conn]net.Conn{}})
	}
	b.wg.Go(func() { b.accept(ctx) })
	b.wg.Go(func() { b.check(ctx) })
	return b, nil
}

// Addr is the balancer's address.
func (b *Balancer) Addr() string { return b.ln.Addr().String() }

// Close stops accepting, ends every connection and waits for its
// goroutines.
func (b *Balancer) Close() error {
	b.cancel()
	err := b.ln.Close()
	for _, be := range b.backends {
		be.closeAll()
	}
	b.wg.Wait()
	return err
}

// Drain stops giving backend i new connections (its endpoint is removed,
// as Kubernetes does when a pod terminates); Up gives it new ones again.
func (b *Balancer) Drain(i int) {
	be := b.backends[i]
	be.mu.Lock()
	be.draining = true
	be.mu.Unlock()
}

// Up marks backend i as serving (after a restart), without waiting for
// the next health check.
func (b *Balancer) Up(i int) {
	be := b.backends[i]
	be.mu.Lock()
	be.up, be.draining = true, false
	be.mu.Unlock()
}

// Conns is the number of open connections to backend i.
func (b *Balancer) Conns(i int) int {
	be := b.backends[i]
	be.mu.Lock()
	defer be.mu.Unlock()
	return len(be.conns)
}

func (b *Balancer) accept(ctx context.Context) {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.wg.Go(func() { b.serve(ctx, c) })
	}
}

// pick returns the backends to try, in order: those up and not draining,
// starting at the next in turn.
func (b *Balancer) pick() []*backend {
	b.mu.Lock()
	start := b.next
	b.next = (b.next + 1) % len(b.backends)
	b.mu.Unlock()
	var out []*backend
	for k := range b.backends {
		be := b.backends[(start+k)%len(b.backends)]
		be.mu.Lock()
		ok := be.up && !be.draining
		be.mu.Unlock()
		if ok {
			out = append(out, be)
		}
	}
	return out
}

func (b *Balancer) serve(ctx context.Context, c net.Conn) {
	defer c.Close()
	var u net.Conn
	var be *backend
	for _, cand := range b.pick() {
		d := net.Dialer{Timeout: time.Second}
		conn, err := d.DialContext(ctx, "tcp", cand.addr)
		if err != nil {
			cand.markDown(b.log)
			continue
		}
		u, be = conn, cand
		break
	}
	if u == nil {
		return // no backend: the client sees the connection closed
	}
	defer u.Close()
	if !be.add(c, u) {
		return
	}
	defer be.remove(c)
	done := make(chan struct{}, 2)
	go func() { io.Copy(u, c); u.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(c, u); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	// One side finishing is followed by the other's FIN; a dead backend's
	// connections are closed by markDown, and all by Close.
	finished := 0
	for finished < 2 {
		select {
		case <-done:
			finished++
		case <-ctx.Done():
			c.Close()
			u.Close()
			for finished < 2 {
				<-done
				finished++
			}
		}
	}
}

// check probes each backend every interval, each in its own goroutine: one
// that does not answer is marked down and its connections are closed.
func (b *Balancer) check(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, be := range b.backends {
		wg.Go(func() {
			t := time.NewTicker(b.interval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				switch b.probe(ctx, be) {
				case probeDown:
					be.markDown(b.log)
				case probeDraining:
					be.mu.Lock()
					be.up, be.draining = true, true
					be.mu.Unlock()
				case probeUp:
					be.mu.Lock()
					be.up, be.draining = true, false
					be.mu.Unlock()
				}
			}
		})
	}
}

// probeTimeout is how long a probe waits for an answer.
const probeTimeout = 2 * time.Second

type probeResult int

const (
	probeDown probeResult = iota
	probeDraining
	probeUp
)

func (b *Balancer) probe(ctx context.Context, be *backend) probeResult {
	// A busy backend may answer late: only a refusal or silence for
	// probeTimeout counts as dead.
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if be.ready == "" {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", be.addr)
		if err != nil {
			return probeDown
		}
		c.Close()
		return probeUp
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, be.ready, nil)
	if err != nil {
		return probeDown
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return probeDown
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return probeDraining
	}
	return probeUp
}

// markDown marks be down and closes its connections.
func (be *backend) markDown(log *slog.Logger) {
	be.mu.Lock()
	was := be.up
	be.up = false
	be.mu.Unlock()
	if was {
		log.Info("balancer: backend down", "addr", be.addr)
	}
	be.closeAll()
}

func (be *backend) add(c, u net.Conn) bool {
	be.mu.Lock()
	defer be.mu.Unlock()
	if !be.up {
		return false
	}
	be.conns[c] = u
	return true
}

func (be *backend) remove(c net.Conn) {
	be.mu.Lock()
	delete(be.conns, c)
	be.mu.Unlock()
}

// closeAll closes every connection to be; Conns counts none of them from
// then on (serve's remove of each finds it gone).
func (be *backend) closeAll() {
	be.mu.Lock()
	conns := be.conns
	be.conns = map[net.Conn]net.Conn{}
	be.mu.Unlock()
	for c, u := range conns {
		c.Close()
		u.Close()
	}
}
