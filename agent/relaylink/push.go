package relaylink

import (
	"context"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// SendPush asks the relay to deliver a push message this machine encrypted
// for a device's browser (agent/push's Sender): the relay signs VAPID and
// carries the opaque body.
func (l *Link) SendPush(ctx context.Context, req *pb.SendPushRequest) (*pb.SendPushResponse, error) {
	tc, err := l.tunnelClient()
	if err != nil {
		return nil, err
	}
	return tc.SendPush(ctx, req)
}
