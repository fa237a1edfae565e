package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/bridge"
	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/internal/wirecodec"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Metadata keys a client may send.
const (
	// MDFromSequence on Converse (when attaching to an existing session):
	// replay events after this sequence before live ones. Also accepted as
	// StartConversation.metadata["from_sequence"].
	MDFromSequence = "x-betcode-from-sequence"
	// MDFollow on ResumeSession: "true" keeps the stream open for live events
	// after the session goes idle, instead of ending it.
	MDFollow = "x-betcode-follow"
	// MDUser names the user a call is made for. The relay sets it on every
	// call it forwards (relay/auth.UserHeader); local clients send none.
	// The agent records it as a session's created_by and as the sent_by of
	// the user's messages.
	MDUser = "x-betcode-user"
)

// callUser returns the x-betcode-user metadata of the call, or "".
func callUser(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(MDUser); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// Agent implements AgentService.
type Agent struct {
	pb.UnimplementedAgentServiceServer
	Sessions *session.Manager
	Log      *slog.Logger
}

// Converse is the bidirectional conversation stream.
func (a *Agent) Converse(stream pb.AgentService_ConverseServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return Status(codes.InvalidArgument, CodeInvalidArgument, "the first message on Converse must be StartConversation")
	}
	var sendMu sync.Mutex
	send := func(ev *pb.AgentEvent, wire *wirecodec.Wire) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return sendEvent(stream, ev, wire)
	}
	// fail ends the stream with a fatal ErrorEvent and the matching status.
	fail := func(err error) error {
		st := toStatus(err)
		if code := BetCodeCode(st); code != "" && code != CodeSlowConsumer {
			_ = send(clientError(st, true), nil)
		}
		return st
	}
	clientID := ClientID(ctx)

	var sess *session.Session
	var from uint64
	if start.SessionId == "" {
		sess, err = a.Sessions.Create(ctx, session.CreateRequest{
			WorkingDirectory: start.WorkingDirectory, Model: start.Model, WorktreeID: start.WorktreeId,
			AllowedTools: start.AllowedTools, PlanMode: start.PlanMode, Metadata: start.Metadata,
			CreatedBy: callUser(ctx), Provider: start.Provider, ProviderConfig: start.ProviderConfig,
		})
		if err != nil {
			return fail(err)
		}
	} else {
		sess, err = a.Sessions.Get(ctx, start.SessionId)
		if err != nil {
			return fail(err)
		}
		from, err = fromSequence(ctx, start, sess.LastSeq())
		if err != nil {
			return err
		}
	}

	// The input lock follows its holder: a client that goes away frees it.
	defer sess.ReleaseInputLock(clientID)
	acceptStream(stream)
	var halfClosed atomic.Bool
	wake := make(chan struct{}, 1)
	st := a.startStream(ctx, sess, session.StreamOptions{From: from, Wake: wake, StopWhenIdle: halfClosed.Load}, send)
	// The receive loop runs until the client half-closes or the stream ends;
	// gRPC unblocks Recv when this handler returns.
	recvDone := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				recvDone <- err
				return
			}
			if err := a.handleRequest(ctx, sess, clientID, req); err != nil {
				_ = send(clientError(toStatus(err), false), nil)
			}
		}
	}()
	for {
		select {
		case err := <-st.done:
			if err == nil {
				return nil
			}
			return fail(err)
		case reason := <-st.cut:
			// Returning aborts a Send blocked on a stalled client.
			return fail(a.cutError(reason, st.lastSent.Load()))
		case err := <-recvDone:
			if !errors.Is(err, io.EOF) {
				return err
			}
			halfClosed.Store(true)
			select {
			case wake <- struct{}{}:
			default:
			}
			recvDone = nil
		}
	}
}

// acceptStream sends a session stream's response headers before its first
// event: a client resuming an idle session (nothing to replay, no turn
// running) learns at once that it is connected again, instead of when the
// next event comes, which may be hours. Called before the stream's sender
// starts (gRPC's sends are not for concurrent use); an error is the
// stream's, and its sends report it.
func acceptStream(stream grpc.ServerStream) { _ = stream.SendHeader(nil) }

// runningStream is a session stream sending in its own goroutine, so that
// the handler can return (aborting a Send blocked on a stalled client) as
// soon as the client is cut off.
type runningStream struct {
	done     chan error // Stream's result
	cut      chan error // the reason the client was cut off
	lastSent atomic.Uint64
}

// startStream streams sess to send (see session.Session.StreamEncoded).
func (a *Agent) startStream(ctx context.Context, sess *session.Session, opt session.StreamOptions, send func(ev *pb.AgentEvent, wire *wirecodec.Wire) error) *runningStream {
	st := &runningStream{done: make(chan error, 1), cut: make(chan error, 1)}
	opt.OnCut = func(reason error) {
		select {
		case st.cut <- reason:
		default:
		}
	}
	go func() {
		st.done <- sess.StreamEncoded(ctx, opt, func(ev *pb.AgentEvent, wire *wirecodec.Wire) error {
			if err := send(ev, wire); err != nil {
				return err
			}
			if ev.Sequence != 0 {
				st.lastSent.Store(ev.Sequence)
			}
			return nil
		})
	}()
	return st
}

// sendEvent sends ev on stream. With wire, the proto.Marshal of ev that the
// session made once when it emitted ev and shares with every subscriber,
// those bytes are sent as they are, and the send allocates nothing for
// them; without it (an event addressed to this client only, a replayed
// one) gRPC marshals ev. Either way the client receives the same message.
func sendEvent(stream grpc.ServerStream, ev *pb.AgentEvent, wire *wirecodec.Wire) error {
	if wire == nil || !wirecodec.Active() {
		return stream.SendMsg(ev)
	}
	return stream.SendMsg(wire)
}

// cutError is the error for a client that was cut off.
func (a *Agent) cutError(reason error, lastSent uint64) error {
	if errors.Is(reason, session.ErrSlowConsumer) {
		return a.Sessions.SlowConsumer(lastSent)
	}
	return reason
}

// clientError is an ErrorEvent addressed to one client, made from a status
// error. It is not part of the session's log and so carries sequence 0.
func clientError(st error, fatal bool) *pb.AgentEvent {
	ei := errorInfo(st)
	ev := bridge.ErrorEvent(ei.GetReason(), status.Convert(st).Message(), fatal)
	ev.GetError().Details = ei.GetMetadata()
	ev.Timestamp = timestamppb.Now()
	return ev
}

// MDClientID names the client (for the input lock). Without it each Converse
// stream is its own client.
const MDClientID = "x-betcode-client-id"

// ClientID returns the caller's client id: the x-betcode-client-id metadata,
// or a fresh id for this call.
func ClientID(ctx context.Context) string {
	if id := namedClientID(ctx); id != "" {
		return id
	}
	return "stream-" + uuid.NewString()
}

// namedClientID returns the x-betcode-client-id metadata, or "".
func namedClientID(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(MDClientID); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

func (a *Agent) handleRequest(ctx context.Context, sess *session.Session, clientID string, req *pb.AgentRequest) error {
	switch r := req.Request.(type) {
	case *pb.AgentRequest_Message:
		return sess.Send(ctx, session.Message{
			ClientID: clientID, SentBy: callUser(ctx), Text: r.Message.GetContent(), Attachments: r.Message.GetAttachments(),
		})
	case *pb.AgentRequest_Permission:
		return sess.Respond(ctx, r.Permission)
	case *pb.AgentRequest_Cancel:
		_, err := sess.Cancel(ctx)
		return err
	case *pb.AgentRequest_Start:
		return &session.InvalidError{Msg: "this stream is already attached to session " + sess.ID() + "; open a new Converse stream for another session"}
	case *pb.AgentRequest_QuestionResponse:
		if r.QuestionResponse.GetQuestionId() == "" {
			return &session.InvalidError{Msg: "question response needs a question_id"}
		}
		return sess.AnswerQuestion(ctx, r.QuestionResponse.GetQuestionId(), r.QuestionResponse.GetAnswers())
	default:
		return &session.InvalidError{Msg: "empty AgentRequest: set one of start, message, permission, question_response, cancel"}
	}
}

// fromSequence reads the replay point of an attaching client. Without one
// the client gets live events only.
func fromSequence(ctx context.Context, start *pb.StartConversation, last uint64) (uint64, error) {
	v := start.GetMetadata()["from_sequence"]
	if md, ok := metadata.FromIncomingContext(ctx); ok && v == "" {
		if vals := md.Get(MDFromSequence); len(vals) > 0 {
			v = vals[0]
		}
	}
	if v == "" {
		return last, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, Status(codes.InvalidArgument, CodeInvalidArgument, "from_sequence must be a non-negative integer, got "+strconv.Quote(v))
	}
	if n > last {
		return 0, pastEnd(n, last)
	}
	return n, nil
}

// ListSessions lists stored sessions.
func (a *Agent) ListSessions(ctx context.Context, req *pb.ListSessionsRequest) (*pb.ListSessionsResponse, error) {
	const maxLimit = 1000
	if req.Limit > maxLimit {
		return nil, Status(codes.InvalidArgument, CodeInvalidArgument, "limit must be at most 1000")
	}
	limit := int(req.Limit)
	if limit == 0 {
		limit = 100
	}
	list, total, err := a.Sessions.Summaries(ctx, eventlog.SessionFilter{
		WorkingDirectory: req.WorkingDirectory, WorktreeID: req.WorktreeId, Limit: limit, Offset: int(req.Offset),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ListSessionsResponse{Total: uint32(max(total, 0)), Sessions: list}, nil
}

// ResumeSession replays a session from a sequence, then streams live events
// until the session is idle (or, with x-betcode-follow: true, until the
// client goes away).
func (a *Agent) ResumeSession(req *pb.ResumeSessionRequest, stream pb.AgentService_ResumeSessionServer) error {
	ctx := stream.Context()
	sess, err := a.Sessions.Get(ctx, req.SessionId)
	if err != nil {
		return toStatus(err)
	}
	if last := sess.LastSeq(); req.FromSequence > last {
		return pastEnd(req.FromSequence, last)
	}
	follow := false
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(MDFollow); len(v) > 0 && v[0] == "true" {
			follow = true
		}
	}
	acceptStream(stream)
	st := a.startStream(ctx, sess, session.StreamOptions{From: req.FromSequence, UntilIdle: !follow}, func(ev *pb.AgentEvent, wire *wirecodec.Wire) error {
		return sendEvent(stream, ev, wire)
	})
	select {
	case err := <-st.done:
		return toStatus(err)
	case reason := <-st.cut:
		return toStatus(a.cutError(reason, st.lastSent.Load()))
	}
}

// CancelTurn interrupts the running turn of a session.
func (a *Agent) CancelTurn(ctx context.Context, req *pb.CancelTurnRequest) (*pb.CancelTurnResponse, error) {
	sess, err := a.Sessions.Get(ctx, req.SessionId)
	if err != nil {
		return nil, toStatus(err)
	}
	was, err := sess.Cancel(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.CancelTurnResponse{WasActive: was}, nil
}

// QueueMessage sends one message to an existing session, idempotently.
func (a *Agent) QueueMessage(ctx context.Context, req *pb.QueueMessageRequest) (*pb.QueueMessageResponse, error) {
	if req.GetMessage() == nil {
		return nil, Status(codes.InvalidArgument, CodeInvalidArgument, "message is required")
	}
	sess, err := a.Sessions.Get(ctx, req.SessionId)
	if err != nil {
		return nil, toStatus(err)
	}
	dup, err := sess.SendOnce(ctx, req.IdempotencyKey, session.Message{
		SentBy: callUser(ctx), Text: req.Message.GetContent(), Attachments: req.Message.GetAttachments(),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.QueueMessageResponse{Accepted: true, Duplicate: dup, Sequence: sess.LastSeq()}, nil
}

// ListPermissionLog lists a session's permission decisions.
func (a *Agent) ListPermissionLog(ctx context.Context, req *pb.PermissionLogRequest) (*pb.PermissionLogResponse, error) {
	sess, err := a.Sessions.Get(ctx, req.SessionId)
	if err != nil {
		return nil, toStatus(err)
	}
	entries, err := sess.PermissionLog(ctx, int(req.Limit))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.PermissionLogResponse{Entries: entries}, nil
}

// CompactSession compacts an idle session.
func (a *Agent) CompactSession(ctx context.Context, req *pb.CompactSessionRequest) (*pb.CompactSessionResponse, error) {
	sess, err := a.Sessions.Get(ctx, req.SessionId)
	if err != nil {
		return nil, toStatus(err)
	}
	res, err := sess.Compact(ctx)
	if err != nil {
		if errors.Is(err, session.ErrBusy) {
			return nil, toStatus(err)
		}
		return nil, Status(codes.Internal, "COMPACTION_FAILED", "Session compaction failed: "+err.Error())
	}
	return &pb.CompactSessionResponse{
		MessagesBefore: uint32(res.MessagesBefore), MessagesAfter: uint32(res.MessagesAfter), TokensSaved: uint32(min(res.TokensSaved, 1<<32-1)),
	}, nil
}

// RequestInputLock gives the calling client (x-betcode-client-id) the
// session's input lock.
func (a *Agent) RequestInputLock(ctx context.Context, req *pb.InputLockRequest) (*pb.InputLockResponse, error) {
	sess, err := a.Sessions.Get(ctx, req.SessionId)
	if err != nil {
		return nil, toStatus(err)
	}
	id := namedClientID(ctx)
	if id == "" {
		return nil, Status(codes.InvalidArgument, CodeInvalidArgument, "set the x-betcode-client-id metadata (the same on your Converse stream) to hold the input lock")
	}
	prev, err := sess.RequestInputLock(id)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.InputLockResponse{Granted: true, PreviousHolder: prev}, nil
}

// ListLocalSessions lists the machine's Claude Code sessions.
func (a *Agent) ListLocalSessions(ctx context.Context, req *pb.ListLocalSessionsRequest) (*pb.ListLocalSessionsResponse, error) {
	limit := int(req.Limit)
	if limit == 0 {
		limit = 100
	}
	list, managed, err := a.Sessions.LocalSessions(ctx, req.WorkingDirectory, limit)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.ListLocalSessionsResponse{}
	for _, t := range list {
		resp.Sessions = append(resp.Sessions, &pb.LocalSession{
			SessionId: t.SessionID, WorkingDirectory: t.WorkingDirectory, UpdatedAt: timestamppb.New(t.UpdatedAt),
			MessageCount: uint32(t.MessageCount), FirstPrompt: t.FirstPrompt, LastMessagePreview: t.LastMessagePreview,
			Adopted: managed[t.SessionID],
		})
	}
	return resp, nil
}

// AdoptSession takes over a Claude Code session started elsewhere.
func (a *Agent) AdoptSession(ctx context.Context, req *pb.AdoptSessionRequest) (*pb.AdoptSessionResponse, error) {
	if req.SessionId == "" {
		return nil, Status(codes.InvalidArgument, CodeInvalidArgument, "session_id is required (see ListLocalSessions)")
	}
	sess, n, err := a.Sessions.Adopt(ctx, req.SessionId)
	if errors.Is(err, session.ErrAlreadyAdopted) {
		return nil, Status(codes.AlreadyExists, "SESSION_EXISTS", "session "+req.SessionId+" is already managed by the agent; attach to it with Converse")
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.AdoptSessionResponse{Session: sess.Summary(), ImportedEvents: uint32(n)}, nil
}

// pastEnd refuses a replay point beyond the session's last sequence.
func pastEnd(from, last uint64) error {
	return Status(codes.OutOfRange, CodeInvalidArgument, fmt.Sprintf("from_sequence %d is past the session's last sequence %d", from, last))
}
