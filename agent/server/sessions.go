package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// CodePermissionNotPending refuses a unary answer (AnswerPermission,
// AnswerQuestion) to a request that is no longer open: answered, timed out,
// withdrawn by Claude, or its CLI gone. Converse answers keep the spec's
// PERMISSION_STALE.
const CodePermissionNotPending = session.CodePermissionNotPending

// sessionStatus is toStatus for the web API's session RPCs: it adds the
// codes they use beyond Converse's (a missing directory, a prompt no longer
// pending, a watcher that fell behind).
func sessionStatus(err error) error {
	var dir *session.DirectoryError
	var watch *session.WatchOverflowError
	switch {
	case errors.As(err, &dir):
		return Status(codes.InvalidArgument, CodeDirectoryNotFound, dir.Error())
	case errors.Is(err, session.ErrStale):
		return Status(codes.FailedPrecondition, CodePermissionNotPending,
			"the request is not pending: it was already answered, timed out or withdrawn")
	case errors.As(err, &watch):
		return Status(codes.ResourceExhausted, CodeSlowConsumer, watch.Error())
	}
	return toStatus(err)
}

// StartSession creates a session and, with a message, starts its first
// turn without holding a stream open.
func (a *Agent) StartSession(ctx context.Context, req *pb.StartSessionRequest) (*pb.StartSessionResponse, error) {
	s, dup, err := a.Sessions.Start(ctx, session.StartRequest{
		CreateRequest: session.CreateRequest{
			WorkingDirectory: req.WorkingDirectory, Model: req.Model, Name: req.Name,
			AllowedTools: req.AllowedTools, PermissionMode: req.PermissionMode, CreatedBy: callUser(ctx),
			Provider: req.Provider, ProviderConfig: req.ProviderConfig,
		},
		Text: req.GetMessage().GetContent(), Attachments: req.GetMessage().GetAttachments(),
		IdempotencyKey: req.IdempotencyKey,
	})
	if err != nil {
		return nil, sessionStatus(err)
	}
	// The answer shows the session as a client attaching now would.
	seq, err := s.Flush(ctx)
	if err != nil {
		return nil, sessionStatus(err)
	}
	if !dup {
		a.logger().Info("session started", "session_id", s.ID(), "created_by", callUser(ctx),
			"permission_mode", req.PermissionMode, "first_turn", req.GetMessage() != nil)
	}
	return &pb.StartSessionResponse{Session: s.Summary(), Sequence: seq, Duplicate: dup}, nil
}

// AnswerPermission answers an open permission request without a stream.
func (a *Agent) AnswerPermission(ctx context.Context, req *pb.AnswerPermissionRequest) (*pb.AnswerPermissionResponse, error) {
	if req.GetResponse().GetRequestId() == "" {
		return nil, Status(codes.InvalidArgument, CodeInvalidArgument, "response.request_id is required")
	}
	s, err := a.Sessions.Get(ctx, req.SessionId)
	if err != nil {
		return nil, sessionStatus(err)
	}
	if err := s.Respond(ctx, req.Response); err != nil {
		return nil, sessionStatus(err)
	}
	seq, err := s.Flush(ctx)
	if err != nil {
		return nil, sessionStatus(err)
	}
	return &pb.AnswerPermissionResponse{Sequence: seq}, nil
}

// AnswerQuestion answers an open question without a stream.
func (a *Agent) AnswerQuestion(ctx context.Context, req *pb.AnswerQuestionRequest) (*pb.AnswerQuestionResponse, error) {
	if req.GetResponse().GetQuestionId() == "" {
		return nil, Status(codes.InvalidArgument, CodeInvalidArgument, "response.question_id is required")
	}
	s, err := a.Sessions.Get(ctx, req.SessionId)
	if err != nil {
		return nil, sessionStatus(err)
	}
	if err := s.AnswerQuestion(ctx, req.Response.QuestionId, req.Response.Answers); err != nil {
		return nil, sessionStatus(err)
	}
	seq, err := s.Flush(ctx)
	if err != nil {
		return nil, sessionStatus(err)
	}
	return &pb.AnswerQuestionResponse{Sequence: seq}, nil
}

// WatchSessions streams the machine's sessions: a snapshot, then changes.
// A client that falls behind (more updates buffered than the agent's watch
// buffer holds) is cut off with RESOURCE_EXHAUSTED / SLOW_CONSUMER and
// watches again for a fresh snapshot.
func (a *Agent) WatchSessions(req *pb.WatchSessionsRequest, stream pb.AgentService_WatchSessionsServer) error {
	ctx := stream.Context()
	if d := req.WorkingDirectory; d != "" && !strings.HasPrefix(d, "/") {
		return Status(codes.InvalidArgument, CodeInvalidArgument, "working_directory must be an absolute path")
	}
	// Watch sends in its own goroutine so that a cut-off client's blocked
	// Send is aborted by returning here; gRPC then ends the stream, which
	// unblocks Send and ends the goroutine.
	done, cut := make(chan error, 1), make(chan error, 1)
	go func() {
		done <- a.Sessions.Watch(ctx, session.WatchOptions{
			WorkingDirectory: req.WorkingDirectory,
			OnCut: func(reason error) {
				select {
				case cut <- reason:
				default:
				}
			},
		}, stream.Send)
	}()
	select {
	case err := <-done:
		return sessionStatus(err)
	case reason := <-cut:
		if errors.Is(reason, session.ErrSlowConsumer) {
			a.logger().Warn("session watcher fell behind; disconnected", "err", reason)
		}
		return sessionStatus(reason)
	}
}

// RenameSession sets a session's display name.
func (a *Agent) RenameSession(ctx context.Context, req *pb.RenameSessionRequest) (*pb.SessionSummary, error) {
	s, err := a.Sessions.Get(ctx, req.SessionId)
	if err != nil {
		return nil, sessionStatus(err)
	}
	sum, err := s.Rename(ctx, req.Name)
	if err != nil {
		return nil, sessionStatus(err)
	}
	return sum, nil
}

// DeleteSession stops a session if it runs and deletes it with its events.
func (a *Agent) DeleteSession(ctx context.Context, req *pb.DeleteSessionRequest) (*pb.DeleteSessionResponse, error) {
	was, err := a.Sessions.Delete(ctx, req.SessionId)
	if err != nil {
		return nil, sessionStatus(err)
	}
	a.logger().Info("session deleted", "session_id", req.SessionId, "was_active", was, "by", callUser(ctx))
	return &pb.DeleteSessionResponse{WasActive: was}, nil
}

// logger returns a.Log, or a logger that discards.
func (a *Agent) logger() *slog.Logger {
	if a.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Log
}
