package relaylink

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// CodeRelayDraining is the BetCode error code a relay replica that shuts
// down (a deploy) sends its agents: as a tunnel-level ErrorFrame, and as
// the status of Register and OpenTunnel while it drains.
const CodeRelayDraining = "RELAY_DRAINING"

// DrainJitter bounds the wait before reconnecting after a drain signal:
// the replica's agents spread their reconnections over it instead of
// arriving at the other replicas in the same instant. The replica already
// paces its signals (200 agents a second), so this only breaks up each
// burst; the machine's clients wait for the reconnection (the chaos soak
// measured 1-1.5 s from a drain to streaming again with 0-500 ms here).
var DrainJitter = 100 * time.Millisecond

// errRelayDraining marks a session the relay ended because it drains.
var errRelayDraining = errors.New("relay replica draining")

// watchedStream notes a drain signal on the tunnel stream: the relay's
// ErrorFrame RELAY_DRAINING or the stream's status.
type watchedStream struct {
	tunnel.FrameStream
	drained atomic.Bool
}

// Recv returns the next frame, noting a drain signal.
func (w *watchedStream) Recv() (*pb.TunnelFrame, error) {
	f, err := w.FrameStream.Recv()
	switch {
	case err != nil:
		if drainingStatus(err) {
			w.drained.Store(true)
		}
	case f.GetError().GetCode() == CodeRelayDraining && f.GetRequestId() == "":
		w.drained.Store(true)
	}
	return f, err
}

// cause returns err, marked errRelayDraining if the relay said it drains.
func (w *watchedStream) cause(err error) error {
	if !w.drained.Load() {
		return err
	}
	if err == nil {
		return errRelayDraining
	}
	return fmt.Errorf("%w: %v", errRelayDraining, err)
}

// drainingStatus reports whether err is a status carrying RELAY_DRAINING.
func drainingStatus(err error) bool { return hasReason(err, CodeRelayDraining) }

// hasReason reports whether err is a status whose ErrorInfo says reason
// (the relay's BetCode error code).
func hasReason(err error, reason string) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Reason == reason {
			return true
		}
	}
	return false
}
