package tunnelsvc

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/relay/registry"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// TestHeartbeatLagAndReconnects: a heartbeat's lag is the relay's clock
// minus its sent_at (a clock ahead of the relay's counts as 0); a second
// tunnel of one machine is a reconnect.
func TestHeartbeatLagAndReconnects(t *testing.T) {
	ctx := machineCtx(t, "m1")
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.UpsertMachine(ctx, store.Machine{ID: "m1", OwnerID: "alice"}); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	m := NewMetrics(prometheus.NewRegistry())
	svc := &Service{Store: st, Registry: registry.New(), Log: slog.New(slog.DiscardHandler), HeartbeatInterval: time.Second,
		Now: func() time.Time { return now }, Metrics: m}
	for _, sent := range []time.Time{now.Add(-1500 * time.Millisecond), now.Add(time.Second)} {
		if _, err := svc.Heartbeat(ctx, &pb.HeartbeatRequest{SentAt: timestamppb.New(sent)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.Heartbeat(ctx, &pb.HeartbeatRequest{}); err != nil { // no sent_at: not observed
		t.Fatal(err)
	}
	var h dto.Metric
	if err := m.HeartbeatLag.Write(&h); err != nil {
		t.Fatal(err)
	}
	if c, s := h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum(); c != 2 || s != 1.5 {
		t.Errorf("heartbeat lag count, sum = %d, %v; want 2, 1.5", c, s)
	}

	m.opened("m1")
	m.opened("m2")
	m.opened("m1")
	if o, r := testutil.ToFloat64(m.TunnelsOpened), testutil.ToFloat64(m.Reconnects); o != 3 || r != 1 {
		t.Errorf("tunnels opened, reconnects = %v, %v; want 3, 1", o, r)
	}
}
