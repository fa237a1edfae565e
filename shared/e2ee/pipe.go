package e2ee

import (
	"io"
	"sync"
)

// pipeDepth is how many messages a Pipe direction holds before Send waits,
// like a stream's flow-control window.
const pipeDepth = 64

// Pipe returns the two ends of an in-memory Transport, for tests: what one
// end sends the other receives, in order. Close ends the closing end's
// direction only, like a gRPC CloseSend: the other end's Recv returns io.EOF
// once it has read the messages sent before, and the closing end's own Send
// fails with io.ErrClosedPipe. Send copies the message.
func Pipe() (Transport, Transport) {
	ab, ba := newPipeDir(), newPipeDir()
	return &pipeEnd{out: ab, in: ba}, &pipeEnd{out: ba, in: ab}
}

// pipeDir is one direction of a Pipe.
type pipeDir struct {
	msgs chan []byte
	done chan struct{} // closed when the sender closes
	once sync.Once
}

func newPipeDir() *pipeDir {
	return &pipeDir{msgs: make(chan []byte, pipeDepth), done: make(chan struct{})}
}

// pipeEnd is one end of a Pipe.
type pipeEnd struct {
	out, in *pipeDir
}

var _ Transport = (*pipeEnd)(nil)

// Send implements Transport.
func (p *pipeEnd) Send(msg []byte) error {
	select {
	case <-p.out.done:
		return io.ErrClosedPipe
	default:
	}
	m := append([]byte(nil), msg...)
	select {
	case p.out.msgs <- m:
		return nil
	case <-p.out.done:
		return io.ErrClosedPipe
	}
}

// Recv implements Transport.
func (p *pipeEnd) Recv() ([]byte, error) {
	select {
	case m := <-p.in.msgs:
		return m, nil
	case <-p.in.done:
		// Deliver what was sent before the close first.
		select {
		case m := <-p.in.msgs:
			return m, nil
		default:
			return nil, io.EOF
		}
	}
}

// Close implements Transport.
func (p *pipeEnd) Close() error {
	p.out.once.Do(func() { close(p.out.done) })
	return nil
}
