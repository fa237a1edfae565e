package e2ee

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/flynn/noise"
)

// Transport is the carrier the relay provides: an ordered pipe that keeps
// message boundaries, such as a ChannelService gRPC bidi stream whose every
// frame holds one Noise message.
//
// This package calls Send from one goroutine at a time and Recv from one
// goroutine at a time (possibly concurrently with each other), and Close at
// most once, possibly while a Send or Recv is in progress (Conn.Close, or a
// handshake giving up when its context ends). An implementation over a
// gRPC stream, where CloseSend must not run concurrently with SendMsg,
// serializes the two.
type Transport interface {
	// Send sends one message. The message is the Transport's after the
	// call: the caller does not touch it again.
	Send(msg []byte) error
	// Recv returns the next message, which is the caller's, or io.EOF once
	// the peer ended the carrier cleanly. It must return (with an error) once
	// the carrier is torn down, so that the goroutine waiting in it ends.
	Recv() ([]byte, error)
	// Close ends this side of the carrier (a gRPC CloseSend): the peer's Recv
	// returns io.EOF once it has read what was sent. It need not unblock
	// this side's Recv: the caller stops waiting on its own.
	Close() error
}

// Why receiver.recv stopped waiting before a message came.
var (
	errLocalClose = errors.New("closed locally")
	errCtxDone    = errors.New("context done")
)

// receiver runs Transport.Recv in a goroutine, one call at a time, so that
// a caller can stop waiting (Close, a deadline, a context) without losing
// the message: one that arrives after the caller gave up is kept for the
// next call. The goroutine ends when Recv returns, which Transport
// promises once the carrier is torn down; no other goroutine is left.
type receiver struct {
	t       Transport
	pending chan recvResult // the Recv in flight, nil when none
}

type recvResult struct {
	msg []byte
	err error
}

// recv returns the next message, or errLocalClose, os.ErrDeadlineExceeded
// or errCtxDone when closed, deadline or ctxDone is closed first (a nil
// channel never is). The caller serializes calls.
func (r *receiver) recv(closed, deadline, ctxDone <-chan struct{}) ([]byte, error) {
	if r.pending == nil {
		ch := make(chan recvResult, 1)
		r.pending = ch
		go func() {
			msg, err := r.t.Recv()
			ch <- recvResult{msg, err}
		}()
	}
	select {
	case res := <-r.pending:
		r.pending = nil
		return res.msg, res.err
	case <-closed:
		return nil, errLocalClose
	case <-deadline:
		return nil, os.ErrDeadlineExceeded
	case <-ctxDone:
		return nil, errCtxDone
	}
}

// handshakeRecv is recv for a handshake: it waits for message what until ctx
// ends, and bounds its size. It returns io.EOF itself when the carrier ended
// cleanly, so that the caller can say what that means at its step.
func handshakeRecv(ctx context.Context, rx *receiver, what string) ([]byte, error) {
	msg, err := rx.recv(nil, nil, ctx.Done())
	switch {
	case errors.Is(err, errCtxDone):
		return nil, fmt.Errorf("wait for %s: %w", what, context.Cause(ctx))
	case errors.Is(err, io.EOF):
		return nil, io.EOF
	case err != nil:
		return nil, fmt.Errorf("receive %s: %w", what, err)
	case len(msg) > noise.MaxMsgLen:
		return nil, fmt.Errorf("%s is %d bytes, over the Noise limit of %d", what, len(msg), noise.MaxMsgLen)
	}
	return msg, nil
}
