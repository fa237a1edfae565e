package sessionsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/provider"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Options configure a Service. Zero values take the defaults in brackets.
type Options struct {
	Logger *slog.Logger
	Now    func() time.Time
	// StopTimeout bounds how long StopSession waits for a turn to end
	// (graceful) or to be cancelled [2m].
	StopTimeout time.Duration
	// WatchBuffer is the status events buffered per watcher before it is
	// cut off [1024].
	WatchBuffer int
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 2 * time.Minute
	}
	if o.WatchBuffer <= 0 {
		o.WatchBuffer = 1024
	}
}

// Service implements pb.SessionServiceServer over a session.Manager.
type Service struct {
	pb.UnimplementedSessionServiceServer

	m   *session.Manager
	opt Options
	hub *hub

	cancel context.CancelFunc
	done   chan struct{}
	// stopMu serialises StopSession and RestartSession per session.
	stopMu sync.Map // session id -> *sync.Mutex
}

var _ pb.SessionServiceServer = (*Service)(nil)

// New returns a Service following m's sessions; Close stops it. It ends
// by itself when m closes.
func New(ctx context.Context, m *session.Manager, opt Options) (*Service, error) {
	opt.setDefaults()
	h := newHub(m, opt.WatchBuffer, opt.Now)
	if err := h.seed(ctx); err != nil {
		return nil, fmt.Errorf("sessionsvc: load sessions: %w", err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Service{m: m, opt: opt, hub: h, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		h.run(ctx)
	}()
	return s, nil
}

// Close stops following the manager and ends every watch stream.
func (s *Service) Close() {
	s.cancel()
	<-s.done
}

func (s *Service) lockSession(id string) func() {
	v, _ := s.stopMu.LoadOrStore(id, &sync.Mutex{})
	mu := v.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// view returns the ManagedSession of a loaded session.
func (s *Service) view(sess *session.Session) *pb.ManagedSession {
	return managed(sess.Meta(), s.hub.status(sess.ID()), sess.Provider(), sess.Pid())
}

// CreateSession validates the request, creates the session (CREATED),
// starts its provider (STARTING -> RUNNING) and sends initial_message.
func (s *Service) CreateSession(ctx context.Context, req *pb.CreateSessionRequest) (*pb.CreateSessionResponse, error) {
	ms, err := s.create(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	return &pb.CreateSessionResponse{Session: ms}, nil
}

// create is CreateSession; extra metadata (a restart's) is added.
func (s *Service) create(ctx context.Context, req *pb.CreateSessionRequest, extra map[string]string) (*pb.ManagedSession, error) {
	dir := req.GetWorkingDirectory()
	if dir == "" {
		return nil, fail(codes.InvalidArgument, CodeProjectNotFound, "working_directory is required")
	}
	if !filepath.IsAbs(dir) {
		return nil, fail(codes.InvalidArgument, CodeProjectNotFound, "working_directory %q must be an absolute path", dir)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fail(codes.NotFound, CodeProjectNotFound, "project directory %q does not exist", dir)
	}
	kind := req.GetProvider()
	if kind == pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED {
		return nil, fail(codes.InvalidArgument, CodeProviderNotSupported, "provider is required (one of the SESSION_PROVIDER_ values, e.g. SESSION_PROVIDER_CLAUDE_CODE)")
	}
	if _, err := s.m.Providers().Get(ctx, kind); err != nil {
		return nil, providerStatus(err)
	}
	if req.GetMaxTokens() < 0 {
		return nil, fail(codes.InvalidArgument, CodeSessionError, "max_tokens must not be negative")
	}
	timeout := req.GetTimeout().AsDuration()
	if req.GetTimeout() != nil && (!req.GetTimeout().IsValid() || timeout < 0) {
		return nil, fail(codes.InvalidArgument, CodeSessionError, "timeout must be a non-negative duration")
	}
	md := map[string]string{}
	maps.Copy(md, extra)
	if v := req.GetTaskId(); v != "" {
		md[metaTaskID] = v
	}
	if v := req.GetMaxTokens(); v > 0 {
		md[metaMaxTokens] = strconv.FormatInt(v, 10)
	}
	if timeout > 0 {
		md[metaTimeout] = timeout.String()
	}
	if v := req.GetModel(); v != "" {
		md[metaInitialModel] = v
	}
	id := session.NewSessionID()
	name := req.GetAgentName()
	if name == "" {
		name = provider.Name(kind) + "-" + id[:8]
	}
	s.hub.hold(id, dir, pb.SessionStatus_SESSION_STATUS_CREATED, "session created")
	sess, err := s.m.Create(ctx, session.CreateRequest{
		ID: id, WorkingDirectory: dir, Model: req.GetModel(), Name: name, Metadata: md,
		Provider: kind, Env: req.GetEnvironment(), ProviderConfig: req.GetProviderConfig(),
		CreatedBy: callUser(ctx),
	})
	if err != nil {
		s.hub.release(id, pb.SessionStatus_SESSION_STATUS_FAILED, 0, "session creation failed: "+err.Error())
		s.hub.forget(id)
		var dirErr *session.DirectoryError
		if errors.As(err, &dirErr) {
			return nil, fail(codes.NotFound, CodeProjectNotFound, "%s", dirErr.Error())
		}
		return nil, sessionStatus(err, codes.Internal, CodeCreationFailed)
	}
	s.hub.hold(id, dir, pb.SessionStatus_SESSION_STATUS_STARTING, "starting "+provider.Name(kind))
	if err := sess.StartProvider(ctx); err != nil {
		s.opt.Logger.Warn("sessionsvc: provider failed to start", "session_id", id, "err", err)
		s.markTerminal(ctx, sess, pb.SessionStatus_SESSION_STATUS_FAILED, err.Error())
		if perr := providerStatus(err); perr != nil {
			return nil, perr
		}
		return nil, sessionStatus(err, codes.Internal, CodeCreationFailed)
	}
	if err := sess.SetMetadata(ctx, map[string]string{metaStartedAt: fmtTime(s.opt.Now())}); err != nil {
		s.opt.Logger.Warn("sessionsvc: saving start time", "session_id", id, "err", err)
	}
	s.hub.release(id, pb.SessionStatus_SESSION_STATUS_UNSPECIFIED, 0, provider.Name(kind)+" started")
	if msg := req.GetInitialMessage(); msg != "" {
		if err := sess.Send(ctx, session.Message{SentBy: callUser(ctx), Text: msg}); err != nil {
			return nil, sessionStatus(err, codes.Unavailable, CodeDeliveryFailed)
		}
		s.hub.refresh(id)
	}
	return s.view(sess), nil
}

// markTerminal stores a STOPPED or FAILED mark and announces it.
func (s *Service) markTerminal(ctx context.Context, sess *session.Session, st pb.SessionStatus, msg string) {
	md := map[string]string{metaStatus: markName(st), metaEndedAt: fmtTime(s.opt.Now())}
	if st == pb.SessionStatus_SESSION_STATUS_FAILED {
		md[metaError] = msg
	}
	if err := sess.SetMetadata(ctx, md); err != nil {
		s.opt.Logger.Warn("sessionsvc: saving status", "session_id", sess.ID(), "err", err)
	}
	s.hub.release(sess.ID(), st, sess.LastSeq(), msg)
}

// GetSession returns a session's state.
func (s *Service) GetSession(ctx context.Context, req *pb.GetSessionRequest) (*pb.ManagedSession, error) {
	sess, err := s.m.Get(ctx, req.GetSessionId())
	if err != nil {
		return nil, getStatus(err)
	}
	return s.view(sess), nil
}

func getStatus(err error) error {
	var inv *session.InvalidError
	if errors.As(err, &inv) {
		return fail(codes.InvalidArgument, CodeSessionNotFound, "%s", inv.Msg)
	}
	return sessionStatus(err, codes.Internal, CodeSessionError)
}

// ListSessions lists sessions, by default the active ones only.
func (s *Service) ListSessions(ctx context.Context, req *pb.SessionServiceListSessionsRequest) (*pb.SessionServiceListSessionsResponse, error) {
	list, _, err := s.m.List(ctx, eventlog.SessionFilter{WorkingDirectory: req.GetWorkingDirectory()})
	if err != nil {
		return nil, sessionStatus(err, codes.Internal, CodeSessionError)
	}
	want := req.GetStatuses()
	out := &pb.SessionServiceListSessionsResponse{}
	for _, meta := range list {
		st := s.hub.status(meta.ID)
		if terminalStatus(st) && !req.GetIncludeTerminated() && !slices.Contains(want, st) {
			continue
		}
		if len(want) > 0 && !slices.Contains(want, st) {
			continue
		}
		kind := session.ProviderOf(meta)
		if p := req.GetProvider(); p != pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED && p != kind {
			continue
		}
		pid := 0
		if _, loaded := s.m.Busy(meta.ID); loaded {
			if sess, err := s.m.Get(ctx, meta.ID); err == nil {
				pid = sess.Pid()
			}
		}
		out.Sessions = append(out.Sessions, managed(meta, st, kind, pid))
	}
	return out, nil
}
