package tunnel

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// FrameStream is the part of an OpenTunnel stream (client or server side)
// that Conn needs.
type FrameStream interface {
	Send(*pb.TunnelFrame) error
	Recv() (*pb.TunnelFrame, error)
}

const (
	maxPending   = 1 << 20   // bytes buffered before Write blocks
	maxSendBytes = 256 << 10 // bytes per TunnelFrame
)

// Conn is a net.Conn over an OpenTunnel stream: StreamFrames carry the
// bytes. Writes never wait for the network unless 1 MiB is already pending;
// one goroutine sends what has accumulated, so a burst of small writes (a
// yamux header and its body, many small messages) leaves in one frame. That
// goroutine runs only while there is something to send, and an idle Conn
// keeps at most a small send buffer: thousands of idle tunnels cost no
// goroutine here.
type Conn struct {
	s           FrameStream
	abort       func() // ends the underlying stream (cancels its context)
	local       net.Addr
	remote      net.Addr
	OnHeartbeat func(*pb.TunnelHeartbeat)
	// OnDirectOffer, if set, takes the relay's DirectOffers (direct.go).
	// It runs on the reading goroutine and must not block.
	OnDirectOffer func(token []byte)
	// OnError, if set, sees each frame carrying an ErrorFrame first and
	// reports whether the tunnel goes on; without it (or when it says no)
	// the frame ends the tunnel (Read fails with its code). An agent that
	// hands over (HandoverHeader) goes on after the relay's drain signal.
	// It runs on the reading goroutine and must not block.
	OnError func(*pb.TunnelFrame) bool

	rbuf []byte

	mu        sync.Mutex
	cond      *sync.Cond // pending shrank, or werr or closing changed
	pending   []byte
	werr      error
	closing   bool
	heartbeat bool          // a heartbeat frame is due
	offer     []byte        // a DirectOffer's token, due to be sent
	sending   bool          // the send goroutine runs
	flushed   chan struct{} // if not nil, closed when the send goroutine stops
	closeOne  sync.Once
}

// keepPending is the capacity of the pending buffer kept for the next burst
// once everything is sent; a larger one (after a burst of large writes) is
// dropped.
const keepPending = 4 << 10

// NewConn wraps s. abort must end s so that a blocked Recv returns (for a
// client stream: cancel its context; for a server stream: return from the
// handler, e.g. by cancelling a context the handler waits on).
func NewConn(s FrameStream, abort func(), local, remote net.Addr) *Conn {
	c := &Conn{s: s, abort: abort, local: local, remote: remote}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// Read returns bytes of the next StreamFrames.
func (c *Conn) Read(p []byte) (int, error) {
	for len(c.rbuf) == 0 {
		c.rbuf = nil // don't keep the last frame's bytes while waiting
		f, err := c.s.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0, io.EOF
			}
			return 0, err
		}
		switch pl := f.Payload.(type) {
		case *pb.TunnelFrame_Stream:
			c.rbuf = pl.Stream.Data
			if pl.Stream.EndOfStream && len(c.rbuf) == 0 {
				return 0, io.EOF
			}
		case *pb.TunnelFrame_Heartbeat:
			if c.OnHeartbeat != nil {
				c.OnHeartbeat(pl.Heartbeat)
			}
		case *pb.TunnelFrame_DirectOffer:
			if c.OnDirectOffer != nil && len(pl.DirectOffer.Token) == DirectTokenLen {
				c.OnDirectOffer(pl.DirectOffer.Token)
			}
		case *pb.TunnelFrame_Error:
			if c.OnError != nil && c.OnError(f) {
				continue
			}
			return 0, errors.New("tunnel closed by peer: " + pl.Error.Code + ": " + pl.Error.Message)
		}
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	if len(c.rbuf) == 0 {
		c.rbuf = nil
	}
	return n, nil
}

// Write queues p for sending.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.pending) >= maxPending && c.werr == nil && !c.closing {
		c.cond.Wait()
	}
	if c.werr != nil {
		return 0, c.werr
	}
	if c.closing {
		return 0, net.ErrClosed
	}
	c.pending = append(c.pending, p...)
	c.startSending()
	return len(p), nil
}

// startSending starts the send goroutine unless it runs. c.mu is held.
func (c *Conn) startSending() {
	if !c.sending {
		c.sending = true
		go c.sendLoop()
	}
}

// sendBufs holds the buffers sendLoop copies pending bytes into (a Send
// has marshalled them by the time it returns).
var sendBufs = sync.Pool{New: func() any { return new([]byte) }}

// sendLoop sends what is pending, at most maxSendBytes per frame, until
// nothing is, then stops.
func (c *Conn) sendLoop() {
	bp := sendBufs.Get().(*[]byte)
	out := (*bp)[:0]
	c.mu.Lock()
	defer func() {
		*bp = out[:0]
		sendBufs.Put(bp)
		c.sending = false
		if cap(c.pending) > keepPending {
			c.pending = nil
		}
		if c.flushed != nil {
			close(c.flushed)
			c.flushed = nil
		}
		c.mu.Unlock()
	}()
	for c.werr == nil {
		var f *pb.TunnelFrame
		switch {
		case c.heartbeat:
			c.heartbeat = false
			f = &pb.TunnelFrame{Payload: &pb.TunnelFrame_Heartbeat{Heartbeat: &pb.TunnelHeartbeat{SentAt: timestamppb.Now()}}}
		case c.offer != nil:
			f = &pb.TunnelFrame{Payload: &pb.TunnelFrame_DirectOffer{DirectOffer: &pb.DirectOffer{Token: c.offer}}}
			c.offer = nil
		case len(c.pending) > 0:
			n := min(len(c.pending), maxSendBytes)
			out = append(out[:0], c.pending[:n]...)
			rest := copy(c.pending, c.pending[n:])
			c.pending = c.pending[:rest]
			c.cond.Broadcast()
			f = DataFrame(out, false)
		default:
			return
		}
		c.mu.Unlock()
		err := c.s.Send(f)
		c.mu.Lock()
		if err != nil && c.werr == nil {
			c.werr = err
			c.cond.Broadcast()
		}
	}
}

// SendHeartbeat queues a TunnelHeartbeat frame. The relay sends one once
// the tunnel is registered, so the agent knows it can be reached.
func (c *Conn) SendHeartbeat() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.werr != nil || c.closing {
		return
	}
	c.heartbeat = true
	c.startSending()
}

// SendDirectOffer queues a DirectOffer frame with token (the relay's end;
// see direct.go). It does not block.
func (c *Conn) SendDirectOffer(token []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.werr != nil || c.closing {
		return
	}
	c.offer = token
	c.startSending()
}

// Close sends what is pending (waiting at most a second), then ends the
// stream.
func (c *Conn) Close() error {
	c.closeOne.Do(func() {
		c.mu.Lock()
		c.closing = true
		c.cond.Broadcast()
		var flushed chan struct{}
		if c.sending {
			flushed = make(chan struct{})
			c.flushed = flushed
		}
		c.mu.Unlock()
		if flushed != nil {
			t := time.NewTimer(time.Second)
			select {
			case <-flushed:
			case <-t.C:
			}
			t.Stop()
		}
		c.mu.Lock()
		if c.werr == nil {
			c.werr = net.ErrClosed
		}
		c.cond.Broadcast()
		c.mu.Unlock()
		if c.abort != nil {
			c.abort()
		}
	})
	return nil
}

// LocalAddr returns the local address given to NewConn.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the remote address given to NewConn.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline is not supported and returns nil; yamux keeps its own timers.
func (c *Conn) SetDeadline(time.Time) error { return nil }

// SetReadDeadline is not supported and returns nil.
func (c *Conn) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline is not supported and returns nil.
func (c *Conn) SetWriteDeadline(time.Time) error { return nil }

var _ net.Conn = (*Conn)(nil)

// Addr is a net.Addr for tunnel endpoints.
type Addr string

// Network returns "tunnel".
func (Addr) Network() string { return "tunnel" }

func (a Addr) String() string { return string(a) }
