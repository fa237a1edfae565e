package relaylink

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestAsTooOld(t *testing.T) {
	withInfo := func(c codes.Code, reason string) error {
		st, err := status.New(c, "relay r requires betcode-agent >= v0.2.0 (this is v0.1.0)").WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "betcode.dev"})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"too old", withInfo(codes.FailedPrecondition, codeAgentTooOld), true},
		{"another precondition", withInfo(codes.FailedPrecondition, "SOMETHING_ELSE"), false},
		{"no details", status.Error(codes.FailedPrecondition, "x"), false},
		{"another code", withInfo(codes.PermissionDenied, codeAgentTooOld), false},
		{"not a status", errors.New("x"), false},
	} {
		got := asTooOld(tt.err)
		if (got != nil) != tt.want {
			t.Errorf("%s: asTooOld = %v, want too old %v", tt.name, got, tt.want)
		}
		if got != nil {
			if _, ok := isTooOld(fmt.Errorf("session: %w", got)); !ok {
				t.Errorf("%s: isTooOld of a wrapped TooOldError is false", tt.name)
			}
		}
	}
}
