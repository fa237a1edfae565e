package sessionsvc

import (
	"context"
	"errors"
	"maps"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// StopSession stops a STARTING, RUNNING or WORKING session: STOPPING,
// then (graceful) waiting for the running turn or (not graceful)
// cancelling it, then stopping the provider, then STOPPED.
func (s *Service) StopSession(ctx context.Context, req *pb.StopSessionRequest) (*pb.StopSessionResponse, error) {
	sess, err := s.m.Get(ctx, req.GetSessionId())
	if err != nil {
		return nil, getStatus(err)
	}
	unlock := s.lockSession(sess.ID())
	defer unlock()
	if err := s.stop(ctx, sess, req.GetGraceful()); err != nil {
		return nil, err
	}
	return &pb.StopSessionResponse{Session: s.view(sess)}, nil
}

// stop is StopSession on a session whose stop lock is held.
func (s *Service) stop(ctx context.Context, sess *session.Session, graceful bool) error {
	id := sess.ID()
	if st := s.hub.status(id); terminalStatus(st) {
		return fail(codes.FailedPrecondition, CodeAlreadyStopped, "session is already %s", markName(st))
	}
	s.hub.hold(id, sess.Meta().WorkingDirectory, pb.SessionStatus_SESSION_STATUS_STOPPING, stopMessage(graceful))
	wctx, cancel := context.WithTimeout(ctx, s.opt.StopTimeout)
	defer cancel()
	var timedOut bool
	if !graceful {
		if _, err := sess.Cancel(wctx); err != nil {
			s.opt.Logger.Warn("sessionsvc: cancelling the turn of a stopping session", "session_id", id, "err", err)
		}
	}
	if err := waitIdle(wctx, sess); err != nil {
		if ctx.Err() != nil {
			// The caller went away: stop anyway, it asked for it.
			ctx = context.WithoutCancel(ctx)
		}
		timedOut = errors.Is(err, context.DeadlineExceeded)
		s.opt.Logger.Warn("sessionsvc: turn did not end in time; stopping the provider", "session_id", id, "err", err)
	}
	if err := sess.StopProvider(context.WithoutCancel(ctx)); err != nil {
		s.opt.Logger.Warn("sessionsvc: stopping the provider", "session_id", id, "err", err)
	}
	s.markTerminal(context.WithoutCancel(ctx), sess, pb.SessionStatus_SESSION_STATUS_STOPPED, "session stopped")
	if timedOut {
		return fail(codes.DeadlineExceeded, CodeStopTimedOut, "the turn did not end within %s; the provider was stopped", s.opt.StopTimeout)
	}
	return nil
}

func stopMessage(graceful bool) string {
	if graceful {
		return "stopping after the current turn"
	}
	return "stopping now"
}

// waitIdle returns once no turn runs and every event is published.
func waitIdle(ctx context.Context, sess *session.Session) error {
	return sess.Stream(ctx, session.StreamOptions{From: sess.LastSeq(), UntilIdle: true}, func(*pb.AgentEvent) error { return nil })
}

// RestartSession stops a session (unless it already stopped) and creates
// a new one with the same configuration, provider_config replaced when the
// request gives one; the new session's restart_count is the old one's + 1.
func (s *Service) RestartSession(ctx context.Context, req *pb.RestartSessionRequest) (*pb.CreateSessionResponse, error) {
	old, err := s.m.Get(ctx, req.GetSessionId())
	if err != nil {
		return nil, getStatus(err)
	}
	unlock := s.lockSession(old.ID())
	defer unlock()
	if !terminalStatus(s.hub.status(old.ID())) {
		if err := s.stop(ctx, old, false); err != nil {
			return nil, err
		}
	}
	meta := old.Meta()
	md := meta.Metadata
	config, env := old.ProviderConfig()
	if len(req.GetProviderConfig()) > 0 {
		config = maps.Clone(req.GetProviderConfig())
	}
	creq := &pb.CreateSessionRequest{
		WorkingDirectory: meta.WorkingDirectory, Provider: old.Provider(), Model: md[metaInitialModel],
		AgentName: meta.Name, TaskId: md[metaTaskID], ProviderConfig: config, Environment: env,
		MaxTokens: atoi64(md[metaMaxTokens]),
	}
	if d := parseDuration(md[metaTimeout]); d > 0 {
		creq.Timeout = durationpb.New(d)
	}
	ms, err := s.create(ctx, creq, map[string]string{
		metaRestarts:    itoa(atoi64(md[metaRestarts]) + 1),
		metaRestartedOf: old.ID(),
	})
	if err != nil {
		return nil, err
	}
	return &pb.CreateSessionResponse{Session: ms}, nil
}
