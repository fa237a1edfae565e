package server

import (
	"context"
	"log/slog"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// UnaryInterceptor refuses unary calls from clients older than the minimum
// (see checkClient). Chain it after authentication.
func (v *Version) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := v.checkClient(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	v.logUnknown(ctx, info.FullMethod, req)
	return handler(ctx, req)
}

// StreamInterceptor refuses streams from clients older than the minimum,
// and on Converse sends a DeprecationWarning event the first time a stream
// uses each deprecated feature.
func (v *Version) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := v.checkClient(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	if info.FullMethod == pb.AgentService_Converse_FullMethodName {
		ss = &deprecationStream{ServerStream: ss, v: v, method: info.FullMethod, flags: v.flags(), warned: map[string]bool{}}
	}
	return handler(srv, ss)
}

// deprecationStream watches a Converse stream's requests for deprecated
// features. It serializes SendMsg, because it sends from the handler's
// receive goroutine while the handler sends events from another.
type deprecationStream struct {
	grpc.ServerStream
	v      *Version
	method string
	flags  []Flag
	mu     sync.Mutex
	warned map[string]bool // features already warned about on this stream
}

func (s *deprecationStream) SendMsg(m any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ServerStream.SendMsg(m)
}

func (s *deprecationStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	req, ok := m.(*pb.AgentRequest)
	if !ok {
		return nil
	}
	s.v.logUnknown(s.Context(), s.method, req)
	for _, name := range DeprecatedUses(req) {
		f, ok := findFlag(s.flags, name)
		if !ok || s.warned[name] {
			continue
		}
		s.warned[name] = true
		// Sequence 0: addressed to this client, not part of the session log.
		ev := &pb.AgentEvent{Timestamp: timestamppb.Now(), Event: &pb.AgentEvent_DeprecationWarning{DeprecationWarning: f.Warning()}}
		if err := s.SendMsg(ev); err != nil {
			return err
		}
	}
	return nil
}

// DeprecatedUses returns the deprecated features a Converse request uses.
func DeprecatedUses(req *pb.AgentRequest) []string {
	if p := req.GetPermission(); p != nil && p.Decision == pb.PermissionDecision_PERMISSION_DECISION_UNSPECIFIED {
		return []string{LegacyPermissionFormat}
	}
	return nil
}

// logUnknown follows the spec's unknown-field policy for the daemon:
// fields this build does not know (from a newer client) are kept, and
// logged at debug level. Requests are walked only when debug is on.
func (v *Version) logUnknown(ctx context.Context, method string, req any) {
	m, ok := req.(proto.Message)
	if !ok || !v.log().Enabled(ctx, slog.LevelDebug) {
		return
	}
	if n := unknownBytes(m.ProtoReflect()); n > 0 {
		cv, _ := clientVersion(ctx)
		v.log().DebugContext(ctx, "request carries unknown fields; kept and ignored", "method", method,
			"message", string(m.ProtoReflect().Descriptor().FullName()), "unknown_bytes", n, "client_version", cv)
	}
}

// unknownBytes is the size of the unknown fields in m and its submessages.
func unknownBytes(m protoreflect.Message) int {
	n := len(m.GetUnknown())
	m.Range(func(fd protoreflect.FieldDescriptor, val protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				val.Map().Range(func(_ protoreflect.MapKey, e protoreflect.Value) bool {
					n += unknownBytes(e.Message())
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				for i := range val.List().Len() {
					n += unknownBytes(val.List().Get(i).Message())
				}
			}
		case fd.Message() != nil:
			n += unknownBytes(val.Message())
		}
		return true
	})
	return n
}
