package webapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// maxListed bounds how many sessions one listing reads.
const maxListed = 10000

// statusError is a gRPC status error with a BetCode code, as the agent
// makes them.
func statusError(c codes.Code, reason, msg string) error {
	st := status.New(c, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain}); err == nil {
		st = d
	}
	return st.Err()
}

func errSessionNotFound(id string) error {
	return statusError(codes.NotFound, "SESSION_NOT_FOUND", "session "+strconv.Quote(id)+" does not exist")
}

// allSessions lists every session (ListSessions, page by page).
func (h *Handler) allSessions(ctx context.Context) ([]*pb.SessionSummary, error) {
	var out []*pb.SessionSummary
	for len(out) < maxListed {
		resp, err := h.agent.ListSessions(ctx, &pb.ListSessionsRequest{Limit: 1000, Offset: uint32(len(out))})
		if err != nil {
			return nil, err
		}
		out = append(out, resp.Sessions...)
		if len(resp.Sessions) == 0 || len(out) >= int(resp.Total) {
			break
		}
	}
	return out, nil
}

// sortSessions orders sessions with open prompts first, then the most
// recently updated.
func sortSessions(l []Session) {
	slices.SortStableFunc(l, func(a, b Session) int {
		if (a.PendingPrompts > 0) != (b.PendingPrompts > 0) {
			if a.PendingPrompts > 0 {
				return -1
			}
			return 1
		}
		return strings.Compare(b.UpdatedAt, a.UpdatedAt)
	})
}

// watchSnapshot reads the snapshot of WatchSessions: every session with
// its open prompts.
func (h *Handler) watchSnapshot(ctx context.Context) ([]*pb.SessionUpdate, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := h.agent.WatchSessions(ctx, &pb.WatchSessionsRequest{})
	if err != nil {
		return nil, err
	}
	var out []*pb.SessionUpdate
	for {
		u, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		if u.SnapshotDone {
			return out, nil
		}
		if u.Session != nil && !u.Deleted {
			out = append(out, u)
		}
	}
}

// findSession returns one session with its open prompts.
func (h *Handler) findSession(ctx context.Context, id string) (*pb.SessionSummary, []*pb.AgentEvent, error) {
	snap, err := h.watchSnapshot(ctx)
	if status.Code(err) == codes.Unimplemented {
		// An agent older than WatchSessions: no open prompts.
		all, err := h.allSessions(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, s := range all {
			if s.Id == id {
				return s, nil, nil
			}
		}
		return nil, nil, errSessionNotFound(id)
	}
	if err != nil {
		return nil, nil, err
	}
	for _, u := range snap {
		if u.Session.GetId() == id {
			return u.Session, u.Pending, nil
		}
	}
	return nil, nil, errSessionNotFound(id)
}

// lastSequence returns a session's last event sequence. ResumeSession
// refuses a start past it with OUT_OF_RANGE naming it, before it streams
// anything, which makes it the one read-only call that tells.
func (h *Handler) lastSequence(ctx context.Context, id string) (uint64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := h.agent.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id, FromSequence: math.MaxUint64})
	if err != nil {
		return 0, err
	}
	_, err = stream.Recv()
	if err == nil || errors.Is(err, io.EOF) {
		return 0, statusError(codes.Internal, "INTERNAL", "the agent replayed events past the last sequence")
	}
	st := status.Convert(err)
	if st.Code() != codes.OutOfRange {
		return 0, err
	}
	const marker = "last sequence "
	i := strings.LastIndex(st.Message(), marker)
	if i < 0 {
		return 0, statusError(codes.Internal, "INTERNAL", "cannot read the session's last sequence from: "+st.Message())
	}
	var last uint64
	if _, err := fmt.Sscan(st.Message()[i+len(marker):], &last); err != nil {
		return 0, statusError(codes.Internal, "INTERNAL", "cannot read the session's last sequence from: "+st.Message())
	}
	return last, nil
}

// follow opens a session's stream with x-betcode-follow: replay from
// after, then live until ctx ends.
func (h *Handler) follow(ctx context.Context, id string, after uint64) (interface {
	Recv() (*pb.AgentEvent, error)
}, error) {
	return h.agent.ResumeSession(metadata.AppendToOutgoingContext(ctx, mdFollow, "true"),
		&pb.ResumeSessionRequest{SessionId: id, FromSequence: after})
}

// attachments decodes the files of a message.
func attachments(files []FileAttachment) ([]*pb.Attachment, int, error) {
	if len(files) > MaxFiles {
		return nil, http.StatusBadRequest, fmt.Errorf("at most %d files per message, got %d", MaxFiles, len(files))
	}
	out := make([]*pb.Attachment, 0, len(files))
	total := 0
	for i, f := range files {
		data := f.Base64Data
		if rest, ok := strings.CutPrefix(data, "data:"); ok {
			// A data: URL, as FileReader.readAsDataURL gives it.
			if _, b64, ok := strings.Cut(rest, ";base64,"); ok {
				data = b64
			}
		}
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("files[%d] (%s): base64Data is not base64: %w", i, f.Name, err)
		}
		total += len(b)
		if total > MaxFileBytes {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("files are larger than %d MiB in all", MaxFileBytes>>20)
		}
		out = append(out, &pb.Attachment{Filename: f.Name, MimeType: f.MimeType, Data: b})
	}
	return out, 0, nil
}

func (h *Handler) listSessions(w http.ResponseWriter, _ *http.Request, ctx context.Context, _ caller) {
	all, err := h.allSessions(ctx)
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	out := make([]Session, 0, len(all))
	for _, s := range all {
		out = append(out, sessionOf(s, nil))
	}
	sortSessions(out)
	writeJSON(w, http.StatusOK, out)
}

// startBody is the body of POST /api/sessions.
type startBody struct {
	Name           string           `json:"name"`
	Cwd            string           `json:"cwd"`
	Model          string           `json:"model"`
	Prompt         string           `json:"prompt"`
	PermissionMode string           `json:"permissionMode"`
	Files          []FileAttachment `json:"files"`
	IdempotencyKey string           `json:"idempotencyKey"`
	Provider       string           `json:"provider"`
	// ProviderConfig is the provider's settings, e.g. {"agent": "gemini"}
	// naming the ACP agent.
	ProviderConfig map[string]string `json:"providerConfig"`
}

func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	var b startBody
	if !readJSON(w, r, &b) {
		return
	}
	if b.Cwd == "" {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "cwd is required")
		return
	}
	provider, err := parseProvider(b.Provider)
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	req := &pb.StartSessionRequest{WorkingDirectory: b.Cwd, Model: b.Model, Name: b.Name,
		PermissionMode: b.PermissionMode, IdempotencyKey: b.IdempotencyKey, Provider: provider,
		ProviderConfig: b.ProviderConfig}
	if b.Prompt != "" || len(b.Files) > 0 {
		att, st, err := attachments(b.Files)
		if err != nil {
			writeError(w, st, "INVALID_ARGUMENT", err.Error())
			return
		}
		req.Message = &pb.UserMessage{Content: b.Prompt, Attachments: att}
	}
	resp, err := h.agent.StartSession(ctx, req)
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	code := http.StatusCreated
	if resp.Duplicate {
		code = http.StatusOK
	}
	writeJSON(w, code, sessionOf(resp.Session, nil))
}

func (h *Handler) getSession(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	s, pending, err := h.findSession(ctx, r.PathValue("id"))
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sessionOf(s, pending))
}

func (h *Handler) renameSession(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	var b struct {
		Name *string `json:"name"`
	}
	if !readJSON(w, r, &b) {
		return
	}
	if b.Name == nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "name is required (\"\" clears it)")
		return
	}
	s, err := h.agent.RenameSession(ctx, &pb.RenameSessionRequest{SessionId: r.PathValue("id"), Name: *b.Name})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sessionOf(s, nil))
}

func (h *Handler) deleteSession(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	if _, err := h.agent.DeleteSession(ctx, &pb.DeleteSessionRequest{SessionId: r.PathValue("id")}); err != nil {
		writeGRPCError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) stopSession(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	id := r.PathValue("id")
	if _, err := h.agent.CancelTurn(ctx, &pb.CancelTurnRequest{SessionId: id}); err != nil {
		writeGRPCError(w, err)
		return
	}
	h.getSession(w, r, ctx, caller{})
}

// messageBody is the body of POST /api/sessions/{id}/messages.
type messageBody struct {
	Prompt         string           `json:"prompt"`
	Files          []FileAttachment `json:"files"`
	IdempotencyKey string           `json:"idempotencyKey"`
}

func (h *Handler) queueMessage(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	var b messageBody
	if !readJSON(w, r, &b) {
		return
	}
	resp, err := h.sendMessage(ctx, r.PathValue("id"), b.Prompt, b.Files, b.IdempotencyKey)
	if err != nil {
		var fe fileError
		if errors.As(err, &fe) {
			writeError(w, fe.status, "INVALID_ARGUMENT", fe.err.Error())
			return
		}
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"sequence": resp.Sequence, "duplicate": resp.Duplicate, "buffered": resp.Buffered})
}

// fileError is a refused attachment, with its HTTP status.
type fileError struct {
	status int
	err    error
}

// Error is the refusal.
func (e fileError) Error() string { return e.err.Error() }

// sendMessage queues a user message (REST and WebSocket).
func (h *Handler) sendMessage(ctx context.Context, id, text string, files []FileAttachment, key string) (*pb.QueueMessageResponse, error) {
	if text == "" && len(files) == 0 {
		return nil, statusError(codes.InvalidArgument, "INVALID_ARGUMENT", "prompt is required")
	}
	att, st, err := attachments(files)
	if err != nil {
		return nil, fileError{status: st, err: err}
	}
	return h.agent.QueueMessage(ctx, &pb.QueueMessageRequest{SessionId: id, IdempotencyKey: key,
		Message: &pb.UserMessage{Content: text, Attachments: att}})
}

// maxEventPage is the most events GET .../events answers at once.
const maxEventPage = 1000

func (h *Handler) sessionEvents(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	id := r.PathValue("id")
	after, limit := uint64(0), maxEventPage
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "after must be a non-negative integer")
			return
		}
		after = n
	}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxEventPage {
			writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "limit must be 1..1000")
			return
		}
		limit = n
	}
	last, err := h.lastSequence(ctx, id)
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	out := []Event{}
	if after < last {
		// The stream follows, so that it never waits for a running turn:
		// it is cut at the last sequence read above.
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := h.follow(sctx, id, after)
		if err != nil {
			writeGRPCError(w, err)
			return
		}
		for len(out) < limit {
			ev, err := stream.Recv()
			if err != nil {
				writeGRPCError(w, err)
				return
			}
			if e := eventOf(id, ev); e != nil {
				out = append(out, e)
			}
			if ev.Sequence >= last {
				break
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// decision maps the web API's behavior to a PermissionDecision.
func decision(behavior string) (pb.PermissionDecision, bool) {
	switch behavior {
	case "allow":
		return pb.PermissionDecision_ALLOW_ONCE, true
	case "allowSession":
		return pb.PermissionDecision_ALLOW_SESSION, true
	case "deny":
		return pb.PermissionDecision_DENY, true
	}
	return 0, false
}

// permissionAnswer is the body of a permission answer (REST and WebSocket).
type permissionAnswer struct {
	Behavior     string         `json:"behavior"`
	Message      string         `json:"message"`
	UpdatedInput map[string]any `json:"updatedInput"`
}

// answerPermission sends a permission answer.
func (h *Handler) sendPermission(ctx context.Context, id, requestID string, a permissionAnswer) (uint64, error) {
	d, ok := decision(a.Behavior)
	if !ok {
		return 0, statusError(codes.InvalidArgument, "INVALID_ARGUMENT", "behavior must be allow, allowSession or deny")
	}
	resp := &pb.PermissionResponse{RequestId: requestID, Decision: d, Reason: a.Message}
	if a.UpdatedInput != nil {
		s, err := structpb.NewStruct(a.UpdatedInput)
		if err != nil {
			return 0, statusError(codes.InvalidArgument, "INVALID_ARGUMENT", "updatedInput: "+err.Error())
		}
		resp.UpdatedInput = s
	}
	out, err := h.agent.AnswerPermission(ctx, &pb.AnswerPermissionRequest{SessionId: id, Response: resp})
	if err != nil {
		return 0, err
	}
	return out.Sequence, nil
}

func (h *Handler) answerPermission(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	var b permissionAnswer
	if !readJSON(w, r, &b) {
		return
	}
	seq, err := h.sendPermission(ctx, r.PathValue("id"), r.PathValue("requestId"), b)
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]uint64{"sequence": seq})
}

func (h *Handler) sendAnswer(ctx context.Context, id, questionID string, answers map[string]string) (uint64, error) {
	if len(answers) == 0 {
		return 0, statusError(codes.InvalidArgument, "INVALID_ARGUMENT", "answers is required: {\"question text\": \"answer\"}")
	}
	out, err := h.agent.AnswerQuestion(ctx, &pb.AnswerQuestionRequest{SessionId: id,
		Response: &pb.UserQuestionResponse{QuestionId: questionID, Answers: answers}})
	if err != nil {
		return 0, err
	}
	return out.Sequence, nil
}

func (h *Handler) answerQuestion(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	var b struct {
		Answers map[string]string `json:"answers"`
	}
	if !readJSON(w, r, &b) {
		return
	}
	seq, err := h.sendAnswer(ctx, r.PathValue("id"), r.PathValue("questionId"), b.Answers)
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]uint64{"sequence": seq})
}

func (h *Handler) permissionLog(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	id := r.PathValue("id")
	resp, err := h.agent.ListPermissionLog(ctx, &pb.PermissionLogRequest{SessionId: id})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	out := make([]map[string]any, 0, len(resp.Entries))
	for _, e := range resp.Entries {
		m := map[string]any{"requestId": e.RequestId, "sessionId": id, "toolName": e.ToolName, "input": structMap(e.Input),
			"behavior": e.Decision, "source": e.Source, "timestamp": rfc3339(e.DecidedAt)}
		if e.Rule != "" {
			m["rule"] = e.Rule
		}
		if e.Reason != "" {
			m["reason"] = e.Reason
		}
		out = append(out, m)
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) changes(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	resp, err := h.workspace.GetChanges(ctx, &pb.GetChangesRequest{SessionId: r.PathValue("id")})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	files := make([]map[string]any, 0, len(resp.Files))
	for _, f := range resp.Files {
		m := map[string]any{"path": f.Path, "status": f.Status, "additions": f.Additions, "deletions": f.Deletions,
			"binary": f.Binary, "staged": f.Staged}
		if f.OldPath != "" {
			m["oldPath"] = f.OldPath
		}
		files = append(files, m)
	}
	writeJSON(w, http.StatusOK, map[string]any{"isGitRepo": resp.IsGitRepo, "branch": resp.Branch, "root": resp.Root,
		"files": files, "truncated": resp.Truncated})
}

func (h *Handler) diff(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	p := r.URL.Query().Get("path")
	if p == "" {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "path is required")
		return
	}
	resp, err := h.workspace.GetFileDiff(ctx, &pb.GetFileDiffRequest{SessionId: r.PathValue("id"), Path: p})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": resp.Path, "diff": resp.Diff, "binary": resp.Binary, "truncated": resp.Truncated})
}

func (h *Handler) usage(w http.ResponseWriter, _ *http.Request, ctx context.Context, _ caller) {
	all, err := h.allSessions(ctx)
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	type sessionUsage struct {
		Usage
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	var total Usage
	per := make([]sessionUsage, 0, len(all))
	for _, s := range all {
		u := Usage{InputTokens: uint64(s.TotalInputTokens), OutputTokens: uint64(s.TotalOutputTokens), CostUSD: s.TotalCostUsd}
		total.InputTokens += u.InputTokens
		total.OutputTokens += u.OutputTokens
		total.CostUSD += u.CostUSD
		per = append(per, sessionUsage{Usage: u, ID: s.Id, Name: s.Name})
	}
	writeJSON(w, http.StatusOK, map[string]any{"total": total, "sessions": per})
}
