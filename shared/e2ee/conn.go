package e2ee

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/flynn/noise"
)

// Roles of the two ends of a channel, in Addr.Role.
const (
	RoleDevice  = "device"
	RoleMachine = "machine"
)

// Network is Addr's network name.
const Network = "betcode-e2ee"

// Addr is the address of one end of a Conn: its role, the machine the
// channel reaches, and the fingerprint of that end's static key, which the
// handshake authenticated. A server that finds an Addr as its connection's
// RemoteAddr knows that the peer proved that key.
type Addr struct {
	Role        string // RoleDevice or RoleMachine
	MachineID   string
	Fingerprint string // Fingerprint form
}

var _ net.Addr = Addr{}

// Network returns Network.
func (a Addr) Network() string { return Network }

// String returns "e2ee:<role>:<fingerprint id>".
func (a Addr) String() string { return "e2ee:" + a.Role + ":" + fingerprintIDOf(a.Fingerprint) }

// Conn is an end-to-end channel after its handshake: a net.Conn whose bytes
// travel sealed in Noise transport messages over a Transport. Read and Write
// may run concurrently with each other (and Close with both); concurrent
// Reads, or concurrent Writes, are serialized.
//
// Write hands its bytes to the Conn's sender goroutine and returns, as a
// socket's write returns once the kernel has the bytes: while one message
// is on its way, the bytes written meanwhile gather and leave sealed as the
// next one. A caller that writes in bursts (an HTTP/2 server streaming
// events) so sends few, full messages instead of one per write, at no added
// latency when the channel is idle. At most maxPending bytes wait: a Write
// beyond that waits for room. A send that fails makes later Writes fail.
// Close first lets what is left go (for at most closeDrain).
//
// Deadlines: read deadlines are exact (a Read waiting for a message returns
// os.ErrDeadlineExceeded); a write deadline is checked before a Write's
// bytes are taken and while it waits for room, not while a message is in
// the Transport, which has no deadlines of its own.
type Conn struct {
	t             Transport
	local, remote Addr
	peer          []byte
	closed        chan struct{}
	closeOnce     sync.Once
	rdl, wdl      *deadline
	kick          chan struct{} // wakes the sender (capacity 1)
	wmu           sync.Mutex    // guards the fields below it up to rmu
	send          *noise.CipherState
	pending       []byte                       // written, not yet taken by the sender
	spare         []byte                       // the sender's last buffer, for reuse
	busy          bool                         // a message is being sealed and sent
	changed       chan struct{}                // closed (and replaced) when pending is taken or busy ends
	werr          error                        // sticky: the channel can no longer send
	filter        func(dst, src []byte) []byte // SetSendFilter's, if set
	fbuf          []byte                       // the filter's last output, for reuse (sender only)
	rmu           sync.Mutex                   // guards the fields below it
	recv          *noise.CipherState
	rx            *receiver
	rbuf          []byte // plaintext received but not yet read
	rerr          error  // sticky: the channel can no longer receive
}

// maxPending bounds the bytes Writes may leave to the sender.
const maxPending = 256 << 10

// maxSpare is the largest sender buffer kept for reuse.
const maxSpare = 1 << 20

var _ net.Conn = (*Conn)(nil)

// newConn wraps t after a handshake that left send and recv, and rx (which
// may hold a Recv in flight), and starts its sender.
func newConn(t Transport, rx *receiver, send, recv *noise.CipherState, local, remote Addr, peer []byte) *Conn {
	c := &Conn{
		t: t, rx: rx, send: send, recv: recv,
		local: local, remote: remote, peer: peer,
		closed: make(chan struct{}),
		rdl:    newDeadline(), wdl: newDeadline(),
		kick: make(chan struct{}, 1), changed: make(chan struct{}),
	}
	go c.sender()
	return c
}

// PeerStatic returns the static public key the peer proved in the handshake.
func (c *Conn) PeerStatic() []byte { return append([]byte(nil), c.peer...) }

// LocalAddr returns this end's Addr.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the peer's Addr.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetSendFilter makes the sender pass the bytes it gathered through f
// before sealing them: f appends to dst what is to be sent for src. It runs
// on the sender goroutine only, one gathered run after another, so it may
// keep state; an HTTP/2 endpoint's channel merges frames with it
// (h2wire.DataMerger). Set it before the first Write.
func (c *Conn) SetSendFilter(f func(dst, src []byte) []byte) {
	c.wmu.Lock()
	c.filter = f
	c.wmu.Unlock()
}

// Write takes p for the sender (see Conn) and returns len(p), or an error
// and 0 when the channel is closed, failed, or past its write deadline.
func (c *Conn) Write(p []byte) (int, error) {
	for {
		c.wmu.Lock()
		if err := c.writable(); err != nil {
			c.wmu.Unlock()
			return 0, err
		}
		if len(p) == 0 {
			c.wmu.Unlock()
			return 0, nil
		}
		if len(c.pending) < maxPending {
			c.pending = append(c.pending, p...)
			c.wmu.Unlock()
			c.wake()
			return len(p), nil
		}
		changed := c.changed
		c.wmu.Unlock()
		select {
		case <-changed:
		case <-c.closed:
		case <-c.wdl.wait():
		}
	}
}

// WriteMessage seals p, at most MaxPayload bytes, in one message, after
// what earlier Writes left, and returns once it is sent: the peer's
// ReadMessage returns it whole. Pairing uses it for its small payloads.
func (c *Conn) WriteMessage(p []byte) error {
	if len(p) > MaxPayload {
		return fmt.Errorf("end-to-end message of %d bytes is over the limit of %d", len(p), MaxPayload)
	}
	for {
		c.wmu.Lock()
		if err := c.writable(); err != nil {
			c.wmu.Unlock()
			return err
		}
		if !c.busy && len(c.pending) == 0 {
			c.busy = true
			c.wmu.Unlock()
			break
		}
		changed := c.changed
		c.wmu.Unlock()
		c.wake()
		select {
		case <-changed:
		case <-c.closed:
		}
	}
	err := c.sealAndSend(p)
	c.wmu.Lock()
	c.busy = false
	if err != nil && c.werr == nil {
		c.werr = err
	}
	more := len(c.pending) > 0
	c.notifyLocked()
	c.wmu.Unlock()
	if more {
		c.wake()
	}
	return err
}

// wake tells the sender there may be bytes to send.
func (c *Conn) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// notifyLocked wakes whoever waits for pending to be taken or a send to
// end. c.wmu is held.
func (c *Conn) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// sender sends what Writes leave, as few messages as it can, until the Conn
// closes or a send fails.
func (c *Conn) sender() {
	for {
		select {
		case <-c.kick:
		case <-c.closed:
			return
		}
		for {
			c.wmu.Lock()
			if len(c.pending) == 0 || c.busy || c.werr != nil {
				c.wmu.Unlock()
				break
			}
			buf := c.pending
			c.pending, c.spare = c.spare[:0], nil
			c.busy = true
			filter := c.filter
			c.notifyLocked()
			c.wmu.Unlock()
			out := buf
			if filter != nil {
				out = filter(c.fbuf[:0], buf)
			}
			var err error
			for p := out; len(p) > 0 && err == nil; p = p[min(len(p), MaxPayload):] {
				err = c.sealAndSend(p[:min(len(p), MaxPayload)])
			}
			c.wmu.Lock()
			c.busy = false
			if cap(buf) <= maxSpare {
				c.spare = buf[:0]
			}
			if filter != nil && cap(out) <= maxSpare {
				c.fbuf = out[:0]
			}
			if err != nil && c.werr == nil {
				c.werr = err
			}
			c.notifyLocked()
			c.wmu.Unlock()
		}
	}
}

// writable reports why the channel cannot send, if it cannot. c.wmu is held.
func (c *Conn) writable() error {
	switch {
	case isClosed(c.closed):
		return fmt.Errorf("end-to-end channel write: %w", net.ErrClosed)
	case c.werr != nil:
		return c.werr
	case isClosed(c.wdl.wait()):
		return os.ErrDeadlineExceeded
	}
	return nil
}

// sealAndSend seals and sends one message; only the goroutine that set
// busy calls it.
func (c *Conn) sealAndSend(p []byte) error {
	msg, err := c.send.Encrypt(make([]byte, 0, len(p)+tagLen), nil, p)
	if err != nil { // only after 2^64-1 messages
		return fmt.Errorf("end-to-end channel: seal: %w", err)
	}
	if err := c.t.Send(msg); err != nil {
		if isClosed(c.closed) {
			return fmt.Errorf("end-to-end channel write: %w", net.ErrClosed)
		}
		// The message may or may not have left: nothing can follow it.
		return fmt.Errorf("end-to-end channel: send: %w", err)
	}
	return nil
}

// Read reads plaintext, receiving and opening the next message when what an
// earlier one held is used up. It returns io.EOF when the carrier ended
// cleanly, and ErrIntegrity (after closing the Conn) when a message fails to
// open.
func (c *Conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if len(c.rbuf) > 0 {
		n := copy(p, c.rbuf)
		c.rbuf = c.rbuf[n:]
		return n, nil
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		msg, err := c.readMsg(nil)
		if err != nil {
			return 0, err
		}
		if len(msg) == 0 {
			continue // an empty WriteMessage: nothing for a byte stream
		}
		n := copy(p, msg)
		c.rbuf = msg[n:]
		return n, nil
	}
}

// ReadMessage returns the next message whole, as the peer's WriteMessage
// sealed it. It fails if Read left part of a message unread: use one or the
// other on a Conn, or ReadMessage only on message boundaries.
func (c *Conn) ReadMessage() ([]byte, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if len(c.rbuf) > 0 {
		return nil, fmt.Errorf("end-to-end channel: ReadMessage with %d bytes of an earlier message unread by Read", len(c.rbuf))
	}
	return c.readMsg(nil)
}

// readMsg receives and opens one message, or stops when ctxDone closes
// (errCtxDone). c.rmu is held.
func (c *Conn) readMsg(ctxDone <-chan struct{}) ([]byte, error) {
	if c.rerr != nil {
		return nil, c.rerr
	}
	if isClosed(c.closed) {
		return nil, fmt.Errorf("end-to-end channel read: %w", net.ErrClosed)
	}
	msg, err := c.rx.recv(c.closed, c.rdl.wait(), ctxDone)
	switch {
	case errors.Is(err, errLocalClose):
		return nil, fmt.Errorf("end-to-end channel read: %w", net.ErrClosed)
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, errCtxDone):
		return nil, err // the message is still to come
	case errors.Is(err, io.EOF):
		c.rerr = io.EOF
		return nil, io.EOF
	case err != nil:
		c.rerr = fmt.Errorf("end-to-end channel: receive: %w", err)
		return nil, c.rerr
	case len(msg) > noise.MaxMsgLen:
		return nil, c.fail(fmt.Errorf("end-to-end channel: a message of %d bytes is over the Noise limit of %d", len(msg), noise.MaxMsgLen))
	}
	// Opened in place: msg is ours, and ChaCha20-Poly1305 allows the exact
	// overlap.
	plain, err := c.recv.Decrypt(msg[:0], nil, msg)
	if err != nil {
		return nil, c.fail(ErrIntegrity)
	}
	return plain, nil
}

// fail ends the channel for err, which later Reads return too. c.rmu is held.
func (c *Conn) fail(err error) error {
	c.rerr = err
	_ = c.Close()
	return err
}

// closeDrain bounds how long Close waits for written bytes to leave.
const closeDrain = 500 * time.Millisecond

// Close sends what Writes left (waiting at most closeDrain, as a socket's
// close lets the kernel send its buffer), closes the Transport (once), and
// makes pending and later Reads and Writes fail with errors wrapping
// net.ErrClosed.
func (c *Conn) Close() error {
	err := fmt.Errorf("close end-to-end channel: %w", net.ErrClosed)
	c.closeOnce.Do(func() {
		c.drain()
		close(c.closed)
		err = nil
		if cerr := c.t.Close(); cerr != nil {
			err = fmt.Errorf("close end-to-end channel: %w", cerr)
		}
	})
	return err
}

// drain waits until the sender has sent what Writes left, it failed, or
// closeDrain passed.
func (c *Conn) drain() {
	var timer *time.Timer
	for {
		c.wmu.Lock()
		if (len(c.pending) == 0 && !c.busy) || c.werr != nil {
			c.wmu.Unlock()
			return
		}
		changed := c.changed
		c.wmu.Unlock()
		if timer == nil {
			timer = time.NewTimer(closeDrain)
			defer timer.Stop()
		}
		c.wake()
		select {
		case <-changed:
		case <-timer.C:
			return
		}
	}
}

// SetDeadline sets the read and write deadlines (see Conn).
func (c *Conn) SetDeadline(t time.Time) error {
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}

// SetReadDeadline sets the time after which a waiting Read returns
// os.ErrDeadlineExceeded; the zero time means never.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.rdl.set(t)
	return nil
}

// SetWriteDeadline sets the time after which a Write fails before sending
// its next message (see Conn); the zero time means never.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.wdl.set(t)
	return nil
}
