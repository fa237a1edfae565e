package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"google.golang.org/grpc/metadata"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

// SealedID is the envelope id for an idempotency key: the key itself when
// it already is 32 lower-case hex digits (e2ee.NewSealedID), else the first
// 128 bits of its SHA-256, so that resending with the same key is a replay.
func SealedID(key string) string {
	s := e2ee.Sealed{V: 1, ID: key, At: 1, Kind: e2ee.SealedQueue, SessionID: "s", Text: "t"}
	if s.Validate() == nil {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

// DeliverSealed seals msg to ch's machine with this device's key and sends
// it through the relay with ChannelService.Deliver and the device token:
// for an offline machine the relay stores it (buffered), and only the
// machine can open it. msg's V and At are filled in when zero.
func DeliverSealed(ctx context.Context, ch Channel, msg e2ee.Sealed) (*pb.DeliverResponse, error) {
	p := ch.Pairing
	if msg.V == 0 {
		msg.V = 1
	}
	if msg.At == 0 {
		msg.At = time.Now().UnixMilli()
	}
	sealed, err := e2ee.SealMessage(ch.Device, p.MachineID, p.MachineKey, msg)
	if err != nil {
		return nil, err
	}
	// The relay's buffer key is fresh: it does not link to msg.ID.
	outer, err := e2ee.NewSealedID()
	if err != nil {
		return nil, err
	}
	cc, err := dialRelay(p.Relay, p.RelayCA, p.Token)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	resp, err := pb.NewChannelServiceClient(cc).Deliver(metadata.AppendToOutgoingContext(ctx, MachineMetadata, p.MachineID),
		&pb.DeliverRequest{Sealed: sealed, IdempotencyKey: outer})
	if err != nil {
		return nil, fmt.Errorf("deliver a sealed message through %s: %w", p.Relay, err)
	}
	return resp, nil
}
