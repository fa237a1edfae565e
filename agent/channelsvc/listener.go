package channelsvc

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/pairing"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

// Listener hands the connections of open channels to a gRPC server
// (grpc.Server.Serve): the calls inside a channel then reach every service
// exactly as a local client's do, with an e2ee.Addr as their peer.
type Listener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

// NewListener returns an open Listener.
func NewListener() *Listener {
	return &Listener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// deliver waits for the server to accept c.
func (l *Listener) deliver(ctx context.Context, c net.Conn) error {
	select {
	case l.conns <- c:
		return nil
	case <-l.done:
		return net.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dial returns one end of a new in-memory connection whose other end the
// server accepts, with the channel's addresses (local, remote) as its own:
// the server then sees the call as the channel's device's.
func (l *Listener) dial(ctx context.Context, local, remote net.Addr) (net.Conn, error) {
	a, b := net.Pipe()
	if err := l.deliver(ctx, channelConn{Conn: b, local: local, remote: remote}); err != nil {
		a.Close()
		b.Close()
		return nil, err
	}
	return a, nil
}

// Accept returns the next channel's connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; channels already served go on until the server
// closes them.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the listener's address.
func (l *Listener) Addr() net.Addr { return e2ee.Addr{Role: "machine"} }

// ToProto converts a device for the API.
func ToProto(d pairing.Device) *pb.Device {
	return &pb.Device{Id: d.ID, Name: d.Name, Fingerprint: d.Fingerprint, PairedAt: timestamp(d.PairedAt),
		LastSeen: timestamp(d.LastSeen), RevokedAt: timestamp(d.RevokedAt)}
}

// timestamp is t for the API; the zero time is unset.
func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
