package tunnelsvc

import (
	"context"
	"errors"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Push messages a machine writes and encrypts itself (docs/e2ee-wire.md,
// "Push, encrypted by the machine"): the relay delivers them for the
// calling machine only (its certificate), within a rate per machine.

// Pusher delivers a machine's encrypted push message: relay/push.Service
// has it.
type Pusher interface {
	// Info reports whether push is enabled.
	Info() (enabled bool, vapidPublicKey string)
	// SendRelayed POSTs the message with the relay's VAPID signature and
	// returns the push service's status; a refused request wraps
	// store.ErrInvalid.
	SendRelayed(ctx context.Context, machineID string, req *pb.SendPushRequest) (status int, gone bool, err error)
}

// Default rate of SendPush per machine: a notification goes to every
// subscription of every paired device, so a burst covers a prompt to a
// few dozen browsers.
const (
	DefaultPushRate  = rate.Limit(2) // per second
	DefaultPushBurst = 60
)

// CodePushRateLimit is SendPush's BetCode error code when a machine sends
// too fast (RESOURCE_EXHAUSTED).
const CodePushRateLimit = "PUSH_RATE_LIMIT"

// pushLimiter returns the machine's SendPush limiter.
func (s *Service) pushLimiter(id string) *rate.Limiter {
	r, b := s.PushRate, s.PushBurst
	if r == 0 {
		r = DefaultPushRate
	}
	if b == 0 {
		b = DefaultPushBurst
	}
	l, _ := s.pushLimits.LoadOrStore(id, rate.NewLimiter(r, b))
	return l.(*rate.Limiter)
}

// SendPush delivers one push message the calling machine encrypted for a
// subscription of one of its devices.
func (s *Service) SendPush(ctx context.Context, req *pb.SendPushRequest) (*pb.SendPushResponse, error) {
	id, err := s.machineID(ctx)
	if err != nil {
		return nil, err
	}
	if s.Revoked != nil && s.Revoked(id) {
		s.audit(ctx, id, "push.send", "denied", "revoked machine")
		return nil, statusErr(codes.PermissionDenied, "", "machine "+id+" was revoked")
	}
	if s.Push == nil {
		return nil, statusErr(codes.FailedPrecondition, "PUSH_DISABLED", "push notifications are not enabled on this relay")
	}
	if on, _ := s.Push.Info(); !on {
		return nil, statusErr(codes.FailedPrecondition, "PUSH_DISABLED", "push notifications are not enabled on this relay (betcode-relay --push-subject)")
	}
	if !s.pushLimiter(id).Allow() {
		return nil, statusErr(codes.ResourceExhausted, CodePushRateLimit, "machine "+id+" sends push messages too fast; retry later")
	}
	code, gone, err := s.Push.SendRelayed(ctx, id, req)
	switch {
	case errors.Is(err, store.ErrInvalid):
		return nil, statusErr(codes.InvalidArgument, "INVALID_ARGUMENT", err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil, statusErr(codes.DeadlineExceeded, "", "push service did not answer in time")
	case err != nil:
		return nil, statusErr(codes.Unavailable, "", err.Error())
	}
	return &pb.SendPushResponse{Status: int32(code), Gone: gone}, nil
}
