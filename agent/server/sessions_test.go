package server

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/session"
)

func TestSessionStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code codes.Code
		bc   string
	}{
		{"missing directory", &session.DirectoryError{Dir: "/x", Err: &session.InvalidError{Msg: "no /x"}}, codes.InvalidArgument, CodeDirectoryNotFound},
		{"wrapped missing directory", fmt.Errorf("start: %w", &session.DirectoryError{Dir: "/x", Err: &session.InvalidError{Msg: "no /x"}}), codes.InvalidArgument, CodeDirectoryNotFound},
		{"not pending", session.ErrStale, codes.FailedPrecondition, CodePermissionNotPending},
		{"watcher behind", &session.WatchOverflowError{Buffer: 4}, codes.ResourceExhausted, CodeSlowConsumer},
		{"unknown session", session.ErrNotFound, codes.NotFound, CodeSessionNotFound},
		{"invalid", &session.InvalidError{Msg: "bad"}, codes.InvalidArgument, CodeInvalidArgument},
		{"shutting down", session.ErrClosed, codes.Unavailable, CodeAgentShuttingDown},
		{"cancelled", context.Canceled, codes.Canceled, ""},
		{"other", errors.New("disk on fire"), codes.Internal, CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sessionStatus(tt.err)
			if status.Code(err) != tt.code || BetCodeCode(err) != tt.bc {
				t.Fatalf("sessionStatus(%v) = %v (betcode %q), want %v / %q", tt.err, err, BetCodeCode(err), tt.code, tt.bc)
			}
		})
	}
	// Converse keeps the spec's code for a stale answer.
	if bc := BetCodeCode(toStatus(session.ErrStale)); bc != CodePermissionStale {
		t.Errorf("toStatus(ErrStale) betcode = %q, want %s", bc, CodePermissionStale)
	}
}

func TestCallUser(t *testing.T) {
	tests := []struct {
		name string
		md   metadata.MD
		want string
	}{
		{"relay call", metadata.Pairs(MDUser, "u-42"), "u-42"},
		{"local call", metadata.Pairs("x-other", "v"), ""},
		{"no metadata", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.md != nil {
				ctx = metadata.NewIncomingContext(ctx, tt.md)
			}
			if got := callUser(ctx); got != tt.want {
				t.Errorf("callUser = %q, want %q", got, tt.want)
			}
		})
	}
}
