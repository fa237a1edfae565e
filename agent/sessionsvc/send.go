package sessionsvc

import (
	"encoding/json"
	"errors"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// SendMessage sends a message to a RUNNING session and streams its
// activity until the session is idle again; the last event of each turn is
// a COMPLETION carrying the turn's text and token usage.
func (s *Service) SendMessage(req *pb.SendMessageRequest, stream grpc.ServerStreamingServer[pb.SessionActivityEvent]) error {
	ctx := stream.Context()
	sess, err := s.m.Get(ctx, req.GetSessionId())
	if err != nil {
		return getStatus(err)
	}
	id := sess.ID()
	if st := s.hub.status(id); st != pb.SessionStatus_SESSION_STATUS_RUNNING {
		return fail(codes.FailedPrecondition, CodeWrongState, "session is %s; messages are accepted when it is RUNNING", statusName(st))
	}
	meta := sess.Meta()
	if max := atoi64(meta.Metadata[metaMaxTokens]); max > 0 && int64(meta.TotalInputTokens+meta.TotalOutputTokens) >= max {
		return fail(codes.ResourceExhausted, CodeTokenBudgetExceeded, "the session used %d of its %d tokens", meta.TotalInputTokens+meta.TotalOutputTokens, max)
	}
	if d := parseDuration(meta.Metadata[metaTimeout]); d > 0 && s.opt.Now().Sub(meta.CreatedAt) > d {
		return fail(codes.DeadlineExceeded, CodeSessionTimeout, "the session's timeout of %s has passed", d)
	}
	from := sess.LastSeq()
	if err := sess.Send(ctx, session.Message{SentBy: callUser(ctx), Text: req.GetMessage()}); err != nil {
		var inv *session.InvalidError
		if errors.As(err, &inv) {
			return fail(codes.InvalidArgument, CodeDeliveryFailed, "%s", inv.Msg)
		}
		if errors.Is(err, session.ErrNotFound) {
			return getStatus(err)
		}
		if perr := providerStatus(err); perr != nil {
			return perr
		}
		return fail(codes.Unavailable, CodeDeliveryFailed, "%v", err)
	}
	s.hub.refresh(id)
	a := activity{id: id}
	err = sess.Stream(ctx, session.StreamOptions{From: from, UntilIdle: true}, func(ev *pb.AgentEvent) error {
		for _, out := range a.convert(ev) {
			if err := stream.Send(out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return sessionStatus(err, codes.Unavailable, CodeProviderConnLost)
	}
	// The turn is over: announce it now rather than when the manager's
	// change feed catches up, so that a status held next (StopSession's
	// STOPPING) comes after it.
	s.hub.refresh(id)
	if !a.completed {
		// No turn ended in what was streamed (it ended before the stream
		// caught up): close the stream as the spec says.
		return stream.Send(a.completion(nil))
	}
	return nil
}

// activity turns a turn's AgentEvents into SessionActivityEvents.
type activity struct {
	id        string
	text      strings.Builder
	tools     map[string]string // tool id -> name
	in, out   int64
	completed bool
}

func (a *activity) event(t pb.ActivityType, ev *pb.AgentEvent) *pb.SessionActivityEvent {
	ts := ev.GetTimestamp()
	if ts == nil {
		ts = timestamppb.Now()
	}
	return &pb.SessionActivityEvent{SessionId: a.id, Type: t, Timestamp: ts}
}

func (a *activity) convert(ev *pb.AgentEvent) []*pb.SessionActivityEvent {
	switch e := ev.Event.(type) {
	case *pb.AgentEvent_TextDelta:
		a.text.WriteString(e.TextDelta.GetText())
	case *pb.AgentEvent_StatusChange:
		if e.StatusChange.GetStatus() == pb.AgentStatus_THINKING && a.text.Len() == 0 {
			out := a.event(pb.ActivityType_ACTIVITY_TYPE_THINKING, ev)
			out.Content = e.StatusChange.GetMessage()
			if out.Content == "" {
				out.Content = "thinking"
			}
			return []*pb.SessionActivityEvent{out}
		}
	case *pb.AgentEvent_ToolCallStart:
		tc := e.ToolCallStart
		if a.tools == nil {
			a.tools = map[string]string{}
		}
		a.tools[tc.GetToolId()] = tc.GetToolName()
		out := a.event(pb.ActivityType_ACTIVITY_TYPE_TOOL_CALL, ev)
		out.ToolName, out.ToolCallId, out.Content = tc.GetToolName(), tc.GetToolId(), tc.GetDescription()
		if out.Content == "" && tc.GetInput() != nil {
			b, _ := json.Marshal(tc.GetInput().AsMap())
			out.Content = string(b)
		}
		return []*pb.SessionActivityEvent{out}
	case *pb.AgentEvent_ToolCallResult:
		tr := e.ToolCallResult
		out := a.event(pb.ActivityType_ACTIVITY_TYPE_TOOL_RESULT, ev)
		out.ToolName, out.ToolCallId, out.ToolSuccess, out.Content = a.tools[tr.GetToolId()], tr.GetToolId(), !tr.GetIsError(), tr.GetOutput()
		return []*pb.SessionActivityEvent{out}
	case *pb.AgentEvent_PermissionRequest:
		pr := e.PermissionRequest
		out := a.event(pb.ActivityType_ACTIVITY_TYPE_STATUS, ev)
		out.ToolName, out.ToolCallId = pr.GetToolName(), pr.GetToolUseId()
		out.Content = "waiting for permission to use " + pr.GetToolName() + " (request " + pr.GetRequestId() + "; answer it with AgentService.Converse or AnswerPermission)"
		return []*pb.SessionActivityEvent{out}
	case *pb.AgentEvent_Error:
		out := a.event(pb.ActivityType_ACTIVITY_TYPE_ERROR, ev)
		out.Content = e.Error.GetCode() + ": " + e.Error.GetMessage()
		return []*pb.SessionActivityEvent{out}
	case *pb.AgentEvent_Usage:
		a.in += int64(e.Usage.GetInputTokens())
		a.out += int64(e.Usage.GetOutputTokens())
	case *pb.AgentEvent_TurnComplete:
		return []*pb.SessionActivityEvent{a.completion(ev)}
	}
	return nil
}

// completion ends a turn: its text and token usage, then a fresh start.
func (a *activity) completion(ev *pb.AgentEvent) *pb.SessionActivityEvent {
	if ev == nil {
		ev = &pb.AgentEvent{}
	}
	out := a.event(pb.ActivityType_ACTIVITY_TYPE_COMPLETION, ev)
	out.Content, out.TokensInput, out.TokensOutput = a.text.String(), a.in, a.out
	a.text.Reset()
	a.in, a.out = 0, 0
	a.completed = true
	return out
}

func statusName(st pb.SessionStatus) string {
	return strings.TrimPrefix(st.String(), "SESSION_STATUS_")
}
