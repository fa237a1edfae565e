package server

import (
	"context"
	"log/slog"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// UnaryRecover turns a handler panic into an INTERNAL error instead of
// crashing the agent.
func UnaryRecover(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic in handler", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
				err = Status(codes.Internal, CodeInternal, "internal error")
			}
		}()
		return h(ctx, req)
	}
}

// StreamRecover is UnaryRecover for streams.
func StreamRecover(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic in handler", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
				err = Status(codes.Internal, CodeInternal, "internal error")
			}
		}()
		return h(srv, ss)
	}
}
