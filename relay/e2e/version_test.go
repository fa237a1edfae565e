package e2e

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// TestVersionNegotiationThroughRelay: GetVersion and NegotiateCapabilities
// reach the machine through the relay like any agent call, so an old client
// is refused with the agent's upgrade hint and a current one is accepted.
// The calls also carry x-betcode-client-version, as betcode sends it; that
// the relay passes it on unchanged is tested in shared/tunnel
// (TestCallHeadersKeepClientMetadata).
func TestVersionNegotiationThroughRelay(t *testing.T) {
	w := newWorld(t, "")
	w.startAgent("m1", w.addr)
	ctx := onMachine(ctxT(t, 120*time.Second), "m1")
	versions := pb.NewVersionServiceClient(w.client())

	v, err := versions.GetVersion(ctx, &pb.GetVersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.ApiVersion != "v1" || v.GetClaudeCode().GetVersion() == "" || v.GetConstraints().GetMinClientVersion() == "" || len(v.FeatureFlags) == 0 {
		t.Fatalf("GetVersion through the relay = %v", v)
	}
	min := v.Constraints.MinClientVersion

	old, err := versions.NegotiateCapabilities(metadata.AppendToOutgoingContext(ctx, "x-betcode-client-version", "0.0.1"),
		&pb.NegotiateRequest{ClientVersion: "0.0.1", ClientType: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "betcode 0.0.1 is too old for this agent (minimum " + min + "): upgrade"; old.Accepted || !strings.Contains(old.RejectionReason, want) || old.UpgradeUrl == "" {
		t.Fatalf("old client: %v, want refused with %q", old, want)
	}

	cur, err := versions.NegotiateCapabilities(metadata.AppendToOutgoingContext(ctx, "x-betcode-client-version", min),
		&pb.NegotiateRequest{ClientVersion: min, ClientType: "cli", RequestedFeatures: []string{"streaming_deltas"}})
	if err != nil {
		t.Fatal(err)
	}
	if !cur.Accepted || len(cur.GrantedFeatures) != 1 {
		t.Fatalf("current client: %v", cur)
	}
}
