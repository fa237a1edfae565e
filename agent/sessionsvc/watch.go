package sessionsvc

import (
	"errors"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// WatchSession streams the session's current status, then each
// transition, until it reaches STOPPED or FAILED or the client goes.
func (s *Service) WatchSession(req *pb.WatchSessionRequest, stream grpc.ServerStreamingServer[pb.SessionStatusEvent]) error {
	ctx := stream.Context()
	sess, err := s.m.Get(ctx, req.GetSessionId())
	if err != nil {
		return getStatus(err)
	}
	return s.watch(stream, sess.ID(), "")
}

// WatchAllSessions streams the current status of every active session
// (optionally of one project), then each transition of any session.
func (s *Service) WatchAllSessions(req *pb.WatchAllSessionsRequest, stream grpc.ServerStreamingServer[pb.SessionStatusEvent]) error {
	return s.watch(stream, "", req.GetWorkingDirectory())
}

func (s *Service) watch(stream grpc.ServerStreamingServer[pb.SessionStatusEvent], id, dir string) error {
	ctx := stream.Context()
	sub, now, err := s.hub.subscribe(id, dir)
	if err != nil {
		return sessionStatus(err, codes.Unavailable, CodeSessionError)
	}
	defer s.hub.unsubscribe(sub)
	for _, ev := range now {
		if err := stream.Send(ev); err != nil {
			return err
		}
		if id != "" && terminalStatus(ev.GetNewStatus()) {
			return nil
		}
	}
	for {
		select {
		case ev := <-sub.ch:
			if err := stream.Send(ev); err != nil {
				return err
			}
			if id != "" && terminalStatus(ev.GetNewStatus()) {
				return nil
			}
		case <-sub.cut:
			if errors.Is(sub.err, errWatchOverflow) {
				return fail(codes.ResourceExhausted, CodeSessionError, "%v; watch again", sub.err)
			}
			return sessionStatus(sub.err, codes.Unavailable, CodeSessionError)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func parseDuration(s string) time.Duration {
	d, _ := time.ParseDuration(s)
	return d
}
