package tunnelsvc

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestAgentTooOld(t *testing.T) {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(":authority", "relay.example.com:8443"))
	for _, tt := range []struct {
		name, min, relay, agent string
		refused                 bool
		install                 string
	}{
		{name: "older release", min: "v0.2.0", relay: "v0.3.0", agent: "v0.1.0", refused: true, install: "v0.3.0"},
		{name: "older, without v", min: "0.2.0", relay: "0.2.1", agent: "0.1.9", refused: true, install: "v0.2.1"},
		{name: "dev relay: install the minimum", min: "v0.2.0", relay: "v0.3.0-dev+669d2cc", agent: "v0.1.0", refused: true, install: "v0.2.0"},
		{name: "old dev build", min: "v0.2.0", relay: "v0.2.0", agent: "0.1.0-dev", refused: true, install: "v0.2.0"},
		{name: "at the minimum", min: "v0.2.0", relay: "v0.2.0", agent: "v0.2.0"},
		{name: "pre-release of the minimum", min: "v0.2.0", relay: "v0.2.0", agent: "v0.2.0-rc.1"},
		{name: "newer than the relay", min: "v0.1.0", relay: "v0.2.0", agent: "v0.3.0"},
		{name: "a commit", min: "v0.2.0", relay: "v0.2.0", agent: "669d2cc-dirty"},
		{name: "dev", min: "v0.2.0", relay: "v0.2.0", agent: "dev"},
		{name: "no version (an agent before MachineInfo)", min: "v0.2.0", relay: "v0.2.0", agent: ""},
		{name: "none", min: "none", relay: "v0.2.0", agent: "v0.0.1"},
		{name: "default minimum serves the previous release", min: "", relay: "v0.2.0", agent: "v0.1.0"},
		{name: "default minimum refuses older", min: "", relay: "v0.2.0", agent: "v0.0.9", refused: true, install: "v0.2.0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &Service{MinAgentVersion: tt.min, Version: tt.relay}
			err := s.agentTooOld(ctx, tt.agent)
			if !tt.refused {
				if err != nil {
					t.Fatalf("agent %s refused: %v", tt.agent, err)
				}
				return
			}
			st, _ := status.FromError(err)
			if st.Code() != codes.FailedPrecondition {
				t.Fatalf("agent %s: %v, want FAILED_PRECONDITION", tt.agent, err)
			}
			want := "relay relay.example.com:8443 requires betcode-agent >= "
			if !strings.HasPrefix(st.Message(), want) || !strings.Contains(st.Message(), "(this is "+tt.agent+")") ||
				!strings.Contains(st.Message(), InstallCommand+tt.install) {
				t.Fatalf("message %q: want %q..., (this is %s), %s%s", st.Message(), want, tt.agent, InstallCommand, tt.install)
			}
			var info *errdetails.ErrorInfo
			for _, d := range st.Details() {
				if i, ok := d.(*errdetails.ErrorInfo); ok {
					info = i
				}
			}
			if info == nil || info.Reason != CodeAgentTooOld || info.Metadata["install_version"] != tt.install {
				t.Fatalf("ErrorInfo = %v, want %s with install_version %s", info, CodeAgentTooOld, tt.install)
			}
		})
	}
}
