package channelsvc_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/pairing"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

// TestShareDeviceSealsNothing: a session share's device acts only inside
// its channels, where agent/share.Gate holds it to its share: a sealed
// envelope of its own (a queued message, a permission answer) is refused,
// whatever session it names.
func TestShareDeviceSealsNothing(t *testing.T) {
	m := newSealedMachine(t)
	k, err := e2ee.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.svc.Store.AddShare(k.Public, "teammate", &pairing.ShareOffer{ID: "sh-1", Expires: time.Now().Add(time.Hour),
		SessionID: "s-1", Mode: "answer"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []e2ee.Sealed{queueMsg("hi"), {Kind: e2ee.SealedPermission, SessionID: "s-1", RequestID: "r-1", Behavior: "allow"}} {
		_, err := m.svc.Deliver(context.Background(), &pb.DeliverRequest{Sealed: m.envelope(t, k, s)})
		if status.Code(err) != codes.PermissionDenied || betcodeCode(err) != "SHARE_SCOPE" {
			t.Errorf("a share device's %s envelope: %v, want PERMISSION_DENIED SHARE_SCOPE", s.Kind, err)
		}
	}
	if len(m.sessions.queued)+len(m.sessions.answers) != 0 {
		t.Fatal("a share device's envelope reached the agent")
	}
}
