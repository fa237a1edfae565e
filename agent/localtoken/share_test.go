package localtoken

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestShareNeverThroughTheRelay: a share code holds a pairing secret, so
// ShareService is refused to a relayed call outside a channel even where
// --relay-e2e=optional serves the other services.
func TestShareNeverThroughTheRelay(t *testing.T) {
	relayed := context.WithValue(context.Background(), tunnelCall{}, true)
	for _, m := range []string{"/betcode.v1.ShareService/CreateShare", "/betcode.v1.ShareService/ListShares", "/betcode.v1.ShareService/RevokeShare"} {
		for _, required := range []bool{false, true} {
			g := NewGuard(token, "/data/local-token")
			g.RequireChannel(required)
			err := g.check(relayed, m)
			if st := status.Convert(err); st.Code() != codes.PermissionDenied || !hasReason(err, "E2E_REQUIRED") {
				t.Errorf("require channel %v: a relayed %s got %v, want PERMISSION_DENIED E2E_REQUIRED", required, m, err)
			}
		}
	}
}
