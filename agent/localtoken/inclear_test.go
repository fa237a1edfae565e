package localtoken

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestNeverInClearThroughTheRelay: a share code holds a pairing secret and
// dictated audio must not cross the relay in clear, so ShareService and
// VoiceService are refused to a relayed call outside a channel even where
// --relay-e2e=optional serves the other services.
func TestNeverInClearThroughTheRelay(t *testing.T) {
	relayed := context.WithValue(context.Background(), tunnelCall{}, true)
	for _, m := range []string{
		"/betcode.v1.ShareService/CreateShare", "/betcode.v1.ShareService/ListShares", "/betcode.v1.ShareService/RevokeShare",
		"/betcode.v1.VoiceService/Transcribe",
	} {
		for _, required := range []bool{false, true} {
			g := NewGuard(token, "/data/local-token")
			g.RequireChannel(required)
			err := g.check(relayed, m)
			if st := status.Convert(err); st.Code() != codes.PermissionDenied || !hasReason(err, "E2E_REQUIRED") {
				t.Errorf("require channel %v: a relayed %s got %v, want PERMISSION_DENIED E2E_REQUIRED", required, m, err)
			}
		}
	}
	g := NewGuard(token, "/data/local-token")
	if err := g.check(relayed, "/betcode.v1.VersionService/GetVersion"); err != nil {
		t.Errorf("optional: a relayed VersionService call was refused: %v", err)
	}
}

// hasReason reports whether err's status carries the BetCode code reason.
func hasReason(err error, reason string) bool {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(interface{ GetReason() string }); ok && ei.GetReason() == reason {
			return true
		}
	}
	return false
}
