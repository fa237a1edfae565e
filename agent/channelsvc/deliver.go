package channelsvc

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/betcode-dev/betcode/agent/pairing"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

// How far a sealed envelope's time may be from the machine's clock: the
// relay's buffer keeps a message at most 7 days; a little skew ahead.
const (
	SealedMaxAge    = 7 * 24 * time.Hour
	SealedMaxFuture = 10 * time.Minute
)

// BetCode error codes of Deliver (docs/api.md).
const (
	CodeSealedInvalid  = "SEALED_INVALID"
	CodeSealedReplayed = "SEALED_REPLAYED"
	CodeSealedExpired  = "SEALED_EXPIRED"
)

// Sessions is what Deliver acts through: the agent's own AgentService
// (agent/server.Agent), so that a sealed message is queued and a sealed
// answer given exactly as the calls would.
type Sessions interface {
	QueueMessage(context.Context, *pb.QueueMessageRequest) (*pb.QueueMessageResponse, error)
	AnswerPermission(context.Context, *pb.AnswerPermissionRequest) (*pb.AnswerPermissionResponse, error)
}

// Deliver opens one sealed envelope (docs/e2ee-wire.md §3) and acts on it:
// from a paired, unrevoked device, at most 7 days old and 10 minutes
// ahead, and never an id taken before.
func (s *Service) Deliver(ctx context.Context, req *pb.DeliverRequest) (*pb.DeliverResponse, error) {
	if s.Sessions == nil || s.Seen == nil {
		return nil, server.Status(codes.Unimplemented, "", "this agent takes no sealed envelopes")
	}
	pub, payload, err := e2ee.OpenSealed(s.Store.Key(), s.MachineID, req.GetSealed())
	if err != nil {
		s.Log.Info("sealed envelope refused", "err", err)
		return nil, server.Status(codes.InvalidArgument, CodeSealedInvalid, err.Error())
	}
	dev, err := s.Store.Authorize(pub)
	if err != nil {
		s.Log.Info("sealed envelope refused", "device", e2ee.FingerprintID(pub), "err", err)
		return nil, server.Status(codes.PermissionDenied, "DEVICE_NOT_PAIRED", err.Error())
	}
	if dev.Share != "" {
		// A teammate's device acts only inside its channels, where
		// agent/share.Gate holds it to its share; a sealed envelope would
		// bypass that (docs/security.md, "Sharing a session").
		s.Log.Info("sealed envelope refused: a session share's device", "device", dev.ID, "share", dev.Share)
		return nil, server.Status(codes.PermissionDenied, "SHARE_SCOPE", "a shared session's device sends nothing in sealed envelopes: open a channel")
	}
	msg, err := e2ee.ParseSealed(payload)
	if err != nil {
		s.Log.Info("sealed envelope refused", "device", dev.ID, "err", err)
		return nil, server.Status(codes.InvalidArgument, CodeSealedInvalid, err.Error())
	}
	now := s.now()
	switch at := time.UnixMilli(msg.At); {
	case at.Before(now.Add(-SealedMaxAge)):
		return nil, server.Status(codes.FailedPrecondition, CodeSealedExpired,
			"the sealed envelope was made "+now.Sub(at).Round(time.Second).String()+" ago, over the limit of 7 days")
	case at.After(now.Add(SealedMaxFuture)):
		return nil, server.Status(codes.FailedPrecondition, CodeSealedExpired,
			"the sealed envelope is dated "+at.Sub(now).Round(time.Second).String()+" ahead of the machine's clock (at most 10 minutes)")
	}
	if err := s.Seen.Take(msg.ID); err != nil {
		if errors.Is(err, pairing.ErrReplayed) {
			s.Log.Warn("sealed envelope replayed", "device", dev.ID)
			return nil, server.Status(codes.AlreadyExists, CodeSealedReplayed, "this sealed envelope was taken before")
		}
		if errors.Is(err, pairing.ErrSeenFull) {
			return nil, server.Status(codes.ResourceExhausted, "", err.Error())
		}
		return nil, server.Status(codes.Internal, "", err.Error())
	}
	// The relay's metadata (its user header) is no part of what the
	// device sealed: none goes on. The device does (DeviceFromContext).
	actx := context.WithValue(metadata.NewIncomingContext(ctx, metadata.MD{}), deviceKey{}, dev)
	switch msg.Kind {
	case e2ee.SealedQueue:
		_, err = s.Sessions.QueueMessage(actx, &pb.QueueMessageRequest{SessionId: msg.SessionID, IdempotencyKey: msg.ID,
			Message: &pb.UserMessage{Content: msg.Text}})
	case e2ee.SealedPermission:
		decision := pb.PermissionDecision_DENY
		if msg.Behavior == "allow" {
			decision = pb.PermissionDecision_ALLOW_ONCE
		}
		_, err = s.Sessions.AnswerPermission(actx, &pb.AnswerPermissionRequest{SessionId: msg.SessionID,
			Response: &pb.PermissionResponse{RequestId: msg.RequestID, Decision: decision}})
	}
	if err != nil {
		// Not taken: the device (or the relay's buffer) may try again.
		s.Seen.Forget(msg.ID)
		s.Log.Info("sealed envelope not taken", "device", dev.ID, "kind", msg.Kind, "session_id", msg.SessionID, "err", err)
		return nil, err
	}
	s.Log.Info("sealed envelope taken", "device", dev.ID, "kind", msg.Kind, "session_id", msg.SessionID)
	return &pb.DeliverResponse{Accepted: true}, nil
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
