package daemon

import (
	"context"

	"github.com/betcode-dev/betcode/agent/channelsvc"
	"github.com/betcode-dev/betcode/agent/push"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// answeringSessions is the sealed envelopes' way to the sessions
// (channelsvc.Service.Sessions): it notes the paired device whose sealed
// answer resolves a prompt (a notification's Allow or Deny), as
// push.Answers' interceptors do for answers given through a channel.
type answeringSessions struct {
	channelsvc.Sessions
	answers *push.Answers
}

// AnswerPermission answers through the agent's AgentService, noting the
// sealing device.
func (s answeringSessions) AnswerPermission(ctx context.Context, req *pb.AnswerPermissionRequest) (*pb.AnswerPermissionResponse, error) {
	refused := func() {}
	if d, ok := channelsvc.DeviceFromContext(ctx); ok {
		refused = s.answers.Note(req.GetResponse().GetRequestId(), d.Fingerprint)
	}
	resp, err := s.Sessions.AnswerPermission(ctx, req)
	if err != nil {
		refused()
	}
	return resp, err
}
