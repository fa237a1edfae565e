package relaylink

import (
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/internal/testpki"
)

// TestLostTunnelIsDialledAgainAtOnce: when the relay replica holding a
// working tunnel dies, the machine's clients wait for the agent's next
// dial, so it comes within LostRetry, not after the schedule's first step.
// A tunnel lost again and again (three quick dials since one stayed up a
// minute) falls back to the schedule, so a relay that drops every tunnel
// is not dialled in a tight loop.
func TestLostTunnelIsDialledAgainAtOnce(t *testing.T) {
	// The schedule's steps are an hour: only the quick dial can bring the
	// tunnel back within the test.
	relay, _, logs := linkWithSlowSchedule(t)

	waitLog(t, logs, "relay link up")
	for range 3 {
		relay.kick <- struct{}{} // the tunnel ends as if its replica died
		waitLog(t, logs, "relay link lost; reconnecting")
		waitLog(t, logs, "relay link up")
	}
	relay.kick <- struct{}{}
	waitLog(t, logs, "relay link down; reconnecting")
	if n := logs.count("WARN relay link lost; reconnecting"); n != 3 {
		t.Errorf("%d quick reconnects, want 3 before the schedule takes over", n)
	}
}

// TestLostTunnelsThatStayedUpAreDialledAgainAtOnce: replicas that die one
// after another, each after the tunnel stayed up a while (QuickAgain),
// keep the agent coming back at once: only tunnels lost again and again,
// each within QuickAgain, fall back to the schedule.
func TestLostTunnelsThatStayedUpAreDialledAgainAtOnce(t *testing.T) {
	saved := QuickAgain
	QuickAgain = 100 * time.Millisecond
	t.Cleanup(func() { QuickAgain = saved })
	relay, _, logs := linkWithSlowSchedule(t)

	waitLog(t, logs, "relay link up")
	for range 5 {
		<-time.After(2 * QuickAgain) // the tunnel stays up past QuickAgain, then its replica dies
		relay.kick <- struct{}{}
		waitLog(t, logs, "relay link lost; reconnecting")
		waitLog(t, logs, "relay link up")
	}
	if n := logs.count("WARN relay link down; reconnecting"); n != 0 {
		t.Errorf("%d reconnections on the schedule, want every one at once", n)
	}
}

// linkWithSlowSchedule runs a link for machine m1 to a fake relay, with a
// reconnection schedule of an hour: only the quick paths (a lost tunnel's
// redial, a hand-over) can bring a tunnel back within a test.
func linkWithSlowSchedule(t *testing.T) (*fakeRelay, *Link, *logs) {
	t.Helper()
	ca := testpki.NewCA(t)
	relay := startRelay(t, ca)
	now := time.Now()
	certPEM, keyPEM := ca.Machine(t, "m1", now.Add(-time.Hour), now.Add(24*time.Hour))
	certPath, keyPath := writePair(t, t.TempDir(), certPEM, keyPEM)
	log, logs := testLogger(t)
	link := runLinkSteps(t, Config{Relay: relay.addr, CAFile: relay.caFile, CertFile: certPath, KeyFile: keyPath, Logger: log},
		[]time.Duration{time.Hour})
	return relay, link, logs
}
