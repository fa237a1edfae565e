package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/pki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// config is the soak's size. The bounded default runs in make test; make
// chaos sets the CHAOS_* variables for the long run.
type config struct {
	seed       uint64
	duration   time.Duration // of the load and the faults
	replicas   int
	agents     int
	realAgents int // of agents, on the real Claude Code CLI
	clients    int
	enrolls    int // machines enrolled during the run
	race       bool
	report     string // docs directory to write reliability.md into ("": none)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func loadConfig(t *testing.T) config {
	t.Helper()
	atoi := func(k, def string) int {
		n, err := strconv.Atoi(envOr(k, def))
		if err != nil || n < 0 {
			t.Fatalf("%s=%q: want a count", k, os.Getenv(k))
		}
		return n
	}
	d, err := time.ParseDuration(envOr("CHAOS_DURATION", "30s"))
	if err != nil {
		t.Fatalf("CHAOS_DURATION: %v", err)
	}
	// make test's bounded run replays one schedule (a red CI is then
	// reproducible as it is); make chaos draws a new one each time.
	seed := uint64(2)
	if os.Getenv("CHAOS_REPORT_DIR") != "" {
		seed = uint64(time.Now().UnixNano() % 1e6)
	}
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED: %v", err)
		}
	}
	c := config{seed: seed, duration: d, replicas: 3, agents: atoi("CHAOS_AGENTS", "10"), realAgents: atoi("CHAOS_REAL_AGENTS", "2"),
		clients: atoi("CHAOS_CLIENTS", "5"), enrolls: atoi("CHAOS_ENROLLS", "1"), race: envOr("CHAOS_RACE", "1") == "1",
		report: os.Getenv("CHAOS_REPORT_DIR")}
	if c.clients < 2 || c.agents < c.clients {
		t.Fatalf("CHAOS_CLIENTS=%d, CHAOS_AGENTS=%d: want at least 2 clients and a machine for each", c.clients, c.agents)
	}
	return c
}

// TestChaosSoak runs the soak (see the package doc). Its default is the
// bounded run of make test: 3 replicas, 10 agents (2 on the real Claude
// Code CLI), 5 clients, 30 s of faults (seed 2: eight kinds of fault,
// replica kill and drain among them). make chaos runs it long.
func TestChaosSoak(t *testing.T) {
	cfg := loadConfig(t)
	wall := time.Now()
	faults := Schedule(Plan{Seed: cfg.seed, Duration: cfg.duration, Replicas: cfg.replicas, Agents: cfg.agents, Clients: cfg.clients})
	t.Logf("seed %d: %d replicas, %d agents (%d real CLI), %d clients, %s of faults", cfg.seed, cfg.replicas, cfg.agents, cfg.realAgents, cfg.clients, cfg.duration)
	defer func() {
		if t.Failed() {
			t.Logf("reproduce with CHAOS_SEED=%d (and the same CHAOS_* sizes)\n%s", cfg.seed, Format(cfg.seed, faults))
		}
	}()
	w := newWorld(t, cfg)

	for i := range cfg.clients {
		if err := w.st.CreateUser(t.Context(), storeUser(fmt.Sprintf("u%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// Machines: agent i belongs to user u<i mod clients>; the first
	// realAgents use the real CLI, spread over the users.
	var wg sync.WaitGroup
	errs := make(chan error, cfg.agents)
	sem := make(chan struct{}, 8)
	for i := range cfg.agents {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := w.addAgent(i, fmt.Sprintf("u%d", i%cfg.clients), i < cfg.realAgents, isPaired(i%cfg.clients)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("agents: %v", err)
	}
	clients := make([]*client, cfg.clients)
	for i := range clients {
		c := &client{idx: i, user: fmt.Sprintf("u%d", i), stall: make(chan time.Duration, 4)}
		c.token = w.newToken(c.user)
		cc, err := w.dial(w.cliLink.Listen, c.token)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		c.cc = cc
		if isWeb(i) {
			cfg, err := w.clientTLS()
			if err != nil {
				t.Fatal(err)
			}
			c.web = newWebDialer(w.cliLink.Listen, cfg)
		}
		c.w = w
		for _, a := range w.agents {
			if a.owner == c.user {
				c.machines = append(c.machines, a)
			} else {
				c.others = append(c.others, a)
			}
		}
		if isPaired(i) {
			cfg, err := w.clientTLS()
			if err != nil {
				t.Fatal(err)
			}
			wd := newWebDialer(w.cliLink.Listen, cfg)
			c.channelURL, c.channelHTTP = strings.Replace(wd.url, "/api/ws", "/api/channel", 1), wd.client
			c.dev = newDevice(t)
			t.Cleanup(c.dev.close)
			for _, a := range c.machines {
				if err := w.pairRetrying(t.Context(), c.dev, a, fmt.Sprintf("phone of %s", c.user)); err != nil {
					t.Fatal(err)
				}
			}
		}
		clients[i] = c
	}
	waitFor(t, 60*time.Second, "every agent's tunnel counted by the replicas", func() bool {
		n, err := w.connected(t.Context())
		return err == nil && n == cfg.agents
	})
	base := footprints(t, w)

	// The load and the faults.
	start := time.Now()
	rec := newRecorder(start)
	for _, c := range clients {
		c.rec = rec
	}
	load, stopLoad := context.WithTimeout(context.Background(), cfg.duration)
	defer stopLoad()
	follow, stopFollow := context.WithCancel(context.Background())
	defer stopFollow()
	var followers sync.WaitGroup
	var loaders sync.WaitGroup
	for _, c := range clients {
		loaders.Go(func() { c.run(load, follow, &followers) })
	}
	fr := &faultRunner{w: w, rec: rec, start: start, clients: clients, agents: cfg.agents}
	var faultsWG sync.WaitGroup
	for _, f := range faults {
		faultsWG.Go(func() { fr.run(load, f) })
	}
	var revs revocations
	loaders.Go(func() { revs.run(load, w, rec) })
	enrolled := 0
	var enrollMu sync.Mutex
	for k := range cfg.enrolls {
		loaders.Go(func() {
			at := time.Duration(k+1) * cfg.duration / time.Duration(cfg.enrolls+1)
			if !sleepCtx(load, time.Until(start.Add(at))) {
				return
			}
			if err := w.enrollAgent(load, cfg.agents+k, clients[k%len(clients)]); err != nil {
				rec.errorf("enrollment %d: %v", k, err)
				return
			}
			enrollMu.Lock()
			enrolled++
			enrollMu.Unlock()
		})
	}
	<-load.Done()
	loaders.Wait()
	faultsWG.Wait() // every fault healed: processes restarted, toxics removed
	loadDur := time.Since(start)
	t.Logf("load over after %s; faults healed; waiting for the sessions to finish and the followers to catch up", loadDur.Round(time.Second))

	// Every session idle and every follower at its session's last event.
	var fs []*follower
	for _, c := range clients {
		fs = append(fs, c.followers...)
	}
	waitFor(t, 2*time.Minute, "every agent's tunnel up again", func() bool {
		w.agentsMu.Lock()
		want := len(w.agents)
		w.agentsMu.Unlock()
		n, err := w.connected(t.Context())
		return err == nil && n == want
	})
	logs := map[*follower][]*pb.AgentEvent{}
	waitFor(t, 3*time.Minute, "every session idle and every follower caught up", func() bool {
		for _, f := range fs {
			if _, ok := logs[f]; ok {
				continue
			}
			evs, err := replay(t.Context(), f)
			if err != nil {
				return false
			}
			f.mu.Lock()
			last := f.last
			f.mu.Unlock()
			if len(evs) == 0 || evs[len(evs)-1].Sequence != last {
				return false
			}
			logs[f] = evs
		}
		return true
	})
	stopFollow()
	followers.Wait()

	res := Result{Seed: cfg.seed, Date: time.Now(), Duration: loadDur, Replicas: cfg.replicas, Agents: cfg.agents,
		RealAgents: cfg.realAgents, Enrolled: enrolled, Clients: cfg.clients, WebClients: countClients(cfg.clients, isWeb), PairedClients: countClients(cfg.clients, isPaired), Users: cfg.clients, Sessions: len(fs)}
	res.Faults = rec.faults
	res.Bugs = foundBugs
	res.Notes = knownLimits
	res.Samples = rec.samples()
	check(t, w, clients, fs, logs, &res)
	res.Revocations, res.RevocationMax = revs.count, revs.max
	if revs.failures != nil {
		res.Failures = append(res.Failures, revs.failures...)
	}
	res.Recoveries, res.RecoveriesAlone = recoveries(t, rec.faults, fs, start)
	// The recovery target (p99 ≤ 1 s) is reported, not enforced: the long
	// runs met it for seed 2026 on one VM and not on another, nor for
	// seed 7 (docs/benchmarks-relay.md); a performance target must not
	// make make test red on a loaded machine,
	// and faults on a stream's own machine (its link blackholed, its agent
	// killed) hold it back by design.
	if p99 := Percentile(res.Recoveries, 99); p99 > time.Second {
		t.Logf("target not met: replica death to streaming again p99 %s > 1 s (%d streams)", p99.Round(time.Millisecond), len(res.Recoveries))
	}
	res.Relays = footprintsAfter(t, w, base)
	for _, f := range res.Relays {
		if !f.OK {
			res.Failures = append(res.Failures, fmt.Sprintf("replica %d did not come back near its footprint: goroutines %.0f (base %.0f), RSS %.1f MiB (base %.1f)",
				f.Replica, f.Goroutine, f.GoroutinesBase, f.RSS/(1<<20), f.RSSBase/(1<<20)))
		}
	}
	for _, e := range rec.errs {
		t.Logf("client error: %s", e)
	}
	why := map[string]int{}
	for _, f := range fs {
		f.mu.Lock()
		for _, b := range f.breaks {
			e := b.err
			if len(e) > 140 {
				e = e[:140]
			}
			why[e]++
		}
		f.mu.Unlock()
	}
	for e, n := range why {
		t.Logf("%4d breaks: %s", n, e)
	}
	for _, c := range clients {
		kind := "gRPC, relay login"
		switch {
		case c.dev != nil:
			kind = "paired device, end-to-end channels"
		case c.web != nil:
			kind = "WebSocket, relay login"
		}
		events, sealed := 0, 0
		var each []string
		for _, f := range c.followers {
			f.mu.Lock()
			events += len(f.seqs)
			each = append(each, fmt.Sprintf("%s %d (%s)", f.machine.id, len(f.seqs), f.kind()))
			f.mu.Unlock()
		}
		for _, q := range c.queued {
			if q.sealed > 0 {
				sealed++
			}
		}
		t.Logf("client %d (%s): %d machines, %d turns, %d events (%s), %d messages sent sealed", c.idx, kind, len(c.machines), c.turns, events, strings.Join(each, ", "), sealed)
	}
	res.Wall = time.Since(wall)
	res.RelayStartRetries = w.relayRestarts
	t.Logf("%d events, %d turns, %d queued (%d buffered), %d permissions, %d breaks; lost %d/%d doubled %d/%d; recovery p50 %s p99 %s (%d); %d revocations (max %s); %d enrolled",
		res.Events, res.Turns, res.Queued, res.QueuedBuffered, res.Permissions, res.Breaks, res.EventsLost, res.QueuedLost, res.EventsDoubled, res.QueuedDoubled,
		Percentile(res.Recoveries, 50).Round(time.Millisecond), Percentile(res.Recoveries, 99).Round(time.Millisecond), len(res.Recoveries), res.Revocations, res.RevocationMax.Round(time.Millisecond), res.Enrolled)
	if cfg.report != "" {
		png := filepath.Join(cfg.report, "reliability-timeline.png")
		if err := res.Timeline(png); err != nil {
			t.Errorf("timeline: %v", err)
		}
		if err := os.WriteFile(filepath.Join(cfg.report, "reliability.md"), []byte(res.Markdown("reliability-timeline.png")), 0o644); err != nil {
			t.Errorf("report: %v", err)
		}
	}
	for _, f := range res.Failures {
		t.Error(f)
	}
}

// foundBugs are the bugs this soak found, each fixed with a test of its own
// in its package; the report lists them.
var foundBugs = []string{
	"agent/session: a message queued with QueueMessage was lost for good when the agent was killed (kill -9) right after " +
		"taking it: SendOnce recorded the idempotency key at once but the message's UserInputEvent only reached the event " +
		"log's background writer, so the client's retry was answered \"duplicate\" for a message the session never kept. " +
		"SendOnce now commits the event before the key (TestSendOnceCommitsTheMessageBeforeItsKey).",
	"agent/session: a queued message delivered twice (seed 2026, 50 agents): a kill -9 after the message's event was " +
		"committed and before its idempotency key was let the client's retry, after the restart, send it again. The key " +
		"is now written in the same SQLite transaction as the event (eventlog.Event.With), so a crash keeps both or " +
		"neither (TestCrashRecovery checks every event recovered after a SIGKILL has its key and no key outlives its event).",
	"agent/server: a client resuming an idle session (nothing to replay, no turn running) got no response headers " +
		"until the session's next event, so it could not tell it was connected again; the soak measured tens of " +
		"seconds \"to streaming again\" for such streams. ResumeSession and Converse now send their headers at once, " +
		"and the relay flushes a relayed stream's headers when nothing follows them yet " +
		"(TestResumingAnIdleSessionAnswersAtOnce).",
	"agent/relaylink: an agent whose tunnel was lost (its replica killed) waited 0.5-1.5 s (the first step of its " +
		"reconnection schedule) before dialling again, and a first connection that failed waited gRPC's default 1 s, " +
		"1.6 s, 2.56 s... A tunnel that was up and is lost is now dialled again within 250 ms (three times in a row at " +
		"most, then the schedule), and the connection retries after 100 ms (TestLostTunnelIsDialledAgainAtOnce).",
	"relay/router: a message queued 35 ms after its machine had moved to another replica (its replica killed) was " +
		"buffered by a replica whose cached record still named the dead one, and waited for the new holder's next " +
		"heartbeat (30 s): the soak saw it as lost at the end. A replica that cannot reach the holder now reads the " +
		"record again, once, and follows it (TestToPeerFollowsAMachineThatMoved). And a replica that buffers a message " +
		"for a machine it does not hold (it drains, and buffers every QueueMessage; or the machine registered elsewhere " +
		"while it stored the message) sends a copy at once to the replica that holds the machine, under the same " +
		"idempotency key (TestBufferedCallIsSentOnToTheMachinesReplica).",
	"relay/server: a drain took its whole grace (25 s) and kept its machines unreachable: the agents are told to move " +
		"only once no unary call runs, and a call stuck on the database (a PostgreSQL fault) held them; and relayed " +
		"streams the drain ended whose clients were not reading kept their connections open, their clients waiting. " +
		"Unary calls now get at most 5 s, a stream whose end cannot be written within 1 s is reset " +
		"(RST_STREAM REFUSED_STREAM: clients retry elsewhere; TestResetUnblocksAWriteAndTellsTheClient), and client " +
		"connections left 2 s after the agents are gone are closed. The drain logs when each part was done.",
	"shared/h2client: a relayed stream the drain ended was reset a second later instead of ending at once (its " +
		"clients saw REFUSED_STREAM at +1.0 s, not RELAY_DRAINING at once): closing a response body did not wake a Read " +
		"blocked in another goroutine, and when the relay's Close beat the context's own cancel the Read slept until " +
		"the drain's 1 s reset. Close now wakes it (TestCloseUnblocksRead); drained streams break within 8-100 ms.",
	"relay/chaos: a client's stall was taken at the client's next event, possibly after the fault's recorded window, " +
		"so a recovery it slowed was counted as one no other fault overlapped. The soak now records when each stall " +
		"actually ran.",
	"relay/chaos: a fault's target i was the i-th agent to finish starting (they start eight at a time), not " +
		"machine i: a replayed seed hit other machines, and a recovery slowed by a fault on its own machine (an agent " +
		"killed, then its connections reset: 19.7 s) was counted as one no other fault overlapped. Target i is now " +
		"machine i (TestFaultTargetIsItsMachine).",
	"shared/tunnel: a stream resumed right after its machine registered again got its response headers only with " +
		"the session's next event, seconds later (2-7 s in the soak, with no error on the way): the tunnel's first " +
		"call goes over the tunnel stream (the direct connection is offered by that call, and behind the balancer an " +
		"agent may go without one for a minute), whose net/http client body cannot say that nothing has arrived, so the " +
		"relay did not flush the headers. With the engine front the stream now carries calls on the relay's own " +
		"client as the direct connection does, and a body that cannot say has its headers flushed " +
		"(TestResumeOnAFreshTunnelAnswersAtOnce fails without the fix on both fronts). Found by logging, for each " +
		"recovery, when the try that streamed began.",
	"relay/server, agent/relaylink: after a drain began, its machines were unreachable for 1-1.8 s: the agents were " +
		"told to move only once the replica's unary calls were done (up to 5 s), because an agent ended its tunnel, " +
		"and the calls on it, when told. An agent now hands over: told RELAY_DRAINING it registers with another " +
		"replica at once and serves the calls under way on its old tunnel until the replica closes it, and the " +
		"replica tells such agents as soon as it drains (older agents still after the calls). Drains' clients were " +
		"streaming again after 0.09-0.35 s in the bounded run, most under 0.4 s in the long one " +
		"(TestDrainHandsOver, TestDrainTellsHandingOverAgentsFirst).",
	"agent/relaylink: replicas killed every few seconds sent their agents back to the reconnection schedule " +
		"(0.5-1.5 s for the first step) after three quick redials, since only a tunnel up for a minute earned quick " +
		"redials again; their clients waited 1.4-3 s. A tunnel up for 10 s now does " +
		"(TestLostTunnelsThatStayedUpAreDialledAgainAtOnce).",
	"agent/session: an agent killed right after a turn ended could find the session \"active\" on restart and show " +
		"\"the agent restarted while this turn was running\" under a finished reply (the session's stored status was " +
		"written after the turn's last event, not with it); found by the browser's never-stale test under load. The " +
		"status now moves in the same commit as the event that starts or ends a turn (TestStoredStatusMovesWithTheTurn).",
	"relay/router: 8-11 times a run a client's retried ResumeSession failed with INTERNAL \"cardinality violation: " +
		"received no request message\": a replica whose record named a dead replica dialled it, the dial failed, and " +
		"the call went on to where the machine was now, but the failed dial had closed the request body (as a " +
		"RoundTripper must), and the relay's front then said of the closed body \"nothing buffered, ended\", so the " +
		"stream reached the agent without its message. A call's body now survives a dial that never read it, and a " +
		"closed body no longer claims an end (TestToPeerFollowsAMachineThatMoved with a server's body, " +
		"TestClosedBodySaysNothingBuffered). 0 in the runs since.",
	"relay/router: after a drain, clients were told MACHINE_OFFLINE for up to a second after their machine was " +
		"back: the drain closes a handed-over tunnel ~0.1 s before the agent has registered elsewhere, a replica that " +
		"read the machine's record in that moment (no replica) trusted its copy for a second, and the clients' " +
		"retries (50 ms doubling to 500 ms) kept hitting it; those drains' clients streamed again after 1.3-1.6 s. A " +
		"record that names no other live replica is now trusted 100 ms (TestOfflineRecordIsReadAgainSoon); recovery " +
		"p99 went from 1.47-1.62 s to 0.91 s (seed 2026, 5 minutes).",
	"relay/tunnelsvc: two machines that registered with another replica while PostgreSQL restarted, after a drain, " +
		"were online but unreachable from the other replicas for 24 s (seed 2026, 2 minutes): the tunnel could not " +
		"record its replica, which was left to the agent's next heartbeat (30 s); and an OpenTunnel whose read of the " +
		"machine's record failed answered \"must Register before opening a tunnel\", which sent its agent onto its " +
		"backoff. Register's and OpenTunnel's store calls are now tried again for up to 3 s, and a replica that could " +
		"not be recorded is tried again at once (TestRegistrationOutlastsAStoreRestart, " +
		"TestOpenTunnelRecordsTheReplicaAfterAStoreFailure).",
	"relay/router: in the same run, the buffered messages of a machine that connected while PostgreSQL restarted " +
		"waited for its next heartbeat (30 s): reading them failed once and the delivery gave up. Reading and " +
		"acknowledging are now tried again, for up to 30 s (TestDeliveryOutlastsAStoreRestart).",
	"shared/webapi, web: web sockets the relay closed while their machine moved (1011 \"snapshot failed\", 1012) came " +
		"back on the app's own schedule (500 ms doubling), the relay's retry hint dropped by the web gateway; and the " +
		"app, unlike the soak's web followers, stopped following a conversation whose stream ended with a transient " +
		"code (MACHINE_OFFLINE, SLOW_CONSUMER...) until a click on Resubscribe. The gateway now passes the hint on " +
		"(retryAfterMs; TestWebSocket, TestWebSocketWatchFails), and the app reconnects after it, else 100 ms doubling, " +
		"and resubscribes by itself (resubscribeDelay, reconnectDelay unit tests).",
	"agent/client: with paired devices in the load (seed 2026, 5 minutes), their CLIs were the slowest to stream " +
		"again (alone on their path p50 0.54 s, 41 of 50 within 1 s): a channel dial to a machine moving between " +
		"replicas failed at the relay's MACHINE_OFFLINE and the gRPC connection over it waited its own backoff (up to " +
		"2 s) before the next. The dial now waits the relay's hint and opens again itself " +
		"(TestDialChannelWaitsForAMovingMachine); 54 of 56 within 1 s in the next run.",
	"web: a paired phone streamed again 11.6 s after its machine's agent was back (seed 2026, 5 minutes: 7 tries " +
		"while it was down, then a 12.8 s wait): the app's reconnection waited up to 30 s. It waits at most 5 s now " +
		"(reconnectDelay unit test; 4.9 s in the next run).",
}

// knownLimits are what the soak does not cover or does not meet yet.
var knownLimits = []string{
	"Replica death to streaming again: a client whose stream went through the dead replica but whose machine is " +
		"elsewhere is back when its gRPC connection is (50 ms backoff, agent/client.ConnectParams); one whose machine's " +
		"tunnel was on the dead replica waits for its agent to dial again (within 250 ms) and register with a surviving " +
		"replica, which writes to PostgreSQL: streams whose recovery overlapped a PostgreSQL fault (restart, blackhole) " +
		"wait for it to end. Faults overlap by design, so those are in the percentiles. The long run shares 2 cores " +
		"with 3 relays, PostgreSQL, the agents and the clients, which stretches every figure.",
	"Clients: every fourth is a paired device whose machines run the shipped --relay-e2e required: its calls go inside " +
		"end-to-end Noise channels (a message whose channel would not open goes sealed, as betcode send does), and it " +
		"follows every second machine as a paired phone's web app does (the event socket in a web/1 channel carried by " +
		"/api/channel), the rest as the CLI (ResumeSession in a gRPC channel). Every fourth follows over the web app's " +
		"WebSocket with a relay login (/api/ws). Web followers reconnect and resubscribe on the app's schedule (100 ms " +
		"doubling, or the relay's retry hint). Their messages and answers go by gRPC (in channels for paired devices); " +
		"the browser's own REST calls (web/1 req frames) are not in the load.",
	"Packet loss: TCP hides loss as delay, so it is covered by latency and jitter, the slicer, blackholes (held bytes, " +
		"no FIN) and reset connections (reset-peer) rather than by dropping packets (tc netem in network namespaces would).",
	"A replica started while PostgreSQL is unreachable exits (\"open store\") and relies on its supervisor to start it " +
		"again, as Kubernetes does; the soak's supervisor counts those restarts.",
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// waitFor polls cond every 200 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// replay reads a session's stored events from the start through the
// balancer (everything healthy by then), until the session is idle.
func replay(ctx context.Context, f *follower) ([]*pb.AgentEvent, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := pb.NewAgentServiceClient(f.c.conn(f.machine)).ResumeSession(onMachine(ctx, f.machine.id), &pb.ResumeSessionRequest{SessionId: f.session})
	if err != nil {
		return nil, err
	}
	var out []*pb.AgentEvent
	for {
		ev, err := s.Recv()
		if err != nil {
			if status.Code(err) == codes.OK || err.Error() == "EOF" {
				return out, nil
			}
			return out, err
		}
		if ev.Sequence > 0 {
			out = append(out, ev)
		}
	}
}

// check compares each client's records with each agent's log.
func check(t *testing.T, w *world, clients []*client, fs []*follower, logs map[*follower][]*pb.AgentEvent, res *Result) {
	for _, f := range fs {
		evs := logs[f]
		f.mu.Lock()
		got := append([]uint64(nil), f.seqs...)
		res.EventsDoubled += f.dups
		res.Breaks += len(f.breaks)
		res.Permissions += f.perms
		res.WrongMachine += len(f.wrong)
		res.Failures = append(res.Failures, f.wrong...)
		f.mu.Unlock()
		res.Events += len(got)
		// Exactly once, in order: the client's sequences are the log's.
		want := make([]uint64, len(evs))
		for i, ev := range evs {
			want[i] = ev.Sequence
		}
		inGot := map[uint64]int{}
		for _, s := range got {
			inGot[s]++
		}
		for _, s := range want {
			if inGot[s] == 0 {
				res.EventsLost++
			}
		}
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				res.Failures = append(res.Failures, fmt.Sprintf("session %s: event %d after %d", f.session, got[i], got[i-1]))
			}
		}
		if len(got) != len(want) {
			res.Failures = append(res.Failures, fmt.Sprintf("session %s on %s: client got %d events, the log has %d", f.session, f.machine.id, len(got), len(want)))
		}
		for _, ev := range evs {
			if wd := ev.GetSessionInfo().GetWorkingDirectory(); wd != "" && !strings.Contains(wd, f.machine.id) {
				res.WrongMachine++
				res.Failures = append(res.Failures, fmt.Sprintf("session %s on %s: its log names %s", f.session, f.machine.id, wd))
			}
		}
	}
	if res.EventsLost > 0 || res.EventsDoubled > 0 {
		res.Failures = append(res.Failures, fmt.Sprintf("events lost %d, doubled %d", res.EventsLost, res.EventsDoubled))
	}
	// Every queued message once in its session's log.
	for _, c := range clients {
		res.Turns += c.turns
		res.WrongUser += len(c.wrongUser)
		res.Failures = append(res.Failures, c.wrongUser...)
		for _, q := range c.queued {
			if !q.ok {
				res.Failures = append(res.Failures, fmt.Sprintf("QueueMessage %s to %s never taken: %s", q.key, q.f.machine.id, q.err))
				continue
			}
			res.Queued++
			if q.sealed > 0 {
				res.QueuedSealed++
			}
			if q.buffered {
				res.QueuedBuffered++
			}
			n := 0
			for _, ev := range logs[q.f] {
				if ev.GetUserInput().GetContent() == q.content {
					n++
				}
			}
			switch {
			case n == 0:
				res.QueuedLost++
				res.Failures = append(res.Failures, fmt.Sprintf("queued message %s (%q) to %s session %s: not in the log (buffered %v, a retry answered duplicate %v, tries sent sealed %d)", q.key, q.content, q.f.machine.id, q.f.session, q.buffered, q.dup, q.sealed))
			case n > 1:
				res.QueuedDoubled += n - 1
				res.Failures = append(res.Failures, fmt.Sprintf("queued message %s (%q) to %s session %s: %d times in the log", q.key, q.content, q.f.machine.id, q.f.session, n))
			}
		}
		// Each machine lists only its own sessions.
		for _, m := range c.machines {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			l, err := pb.NewAgentServiceClient(c.conn(m)).ListSessions(onMachine(ctx, m.id), &pb.ListSessionsRequest{})
			cancel()
			if err != nil {
				res.Failures = append(res.Failures, fmt.Sprintf("ListSessions on %s after the run: %v", m.id, err))
				continue
			}
			for _, s := range l.Sessions {
				if !strings.Contains(s.WorkingDirectory, m.id) {
					res.WrongMachine++
					res.Failures = append(res.Failures, fmt.Sprintf("ListSessions on %s lists %s in %s", m.id, s.Id, s.WorkingDirectory))
				}
			}
		}
	}
	// Every process up: the schedule restarted all it stopped.
	for _, r := range w.relays {
		res.ProcessesExpected++
		if p := r.proc(); p != nil && p.running() {
			res.ProcessesUp++
		} else {
			res.Failures = append(res.Failures, fmt.Sprintf("relay %d is not running at the end (log %s)", r.idx, filepath.Join(w.dir, fmt.Sprintf("relay-%d.log", r.idx))))
		}
	}
	w.agentsMu.Lock()
	for _, a := range w.agents {
		res.ProcessesExpected++
		if p := a.proc(); p != nil && p.running() {
			res.ProcessesUp++
		} else {
			res.Failures = append(res.Failures, fmt.Sprintf("agent %s is not running at the end", a.id))
		}
	}
	w.agentsMu.Unlock()
}

// recoveries is, for each replica killed or drained, the time from its
// death to each client stream it broke streaming again; alone are those
// no other fault on the stream's path overlapped (see overlaps).
func recoveries(t *testing.T, faults []FaultRecord, fs []*follower, start time.Time) (all, alone []time.Duration) {
	for k, fr := range faults {
		if fr.Kind != ReplicaKill && fr.Kind != ReplicaDrain {
			continue
		}
		died := start.Add(fr.Began)
		for _, f := range fs {
			f.mu.Lock()
			for _, b := range f.breaks {
				if b.at.Before(died) || b.at.After(died.Add(3*time.Second)) || b.resumed.IsZero() {
					continue
				}
				d := b.resumed.Sub(died)
				all = append(all, d)
				other := overlaps(faults, k, f, fr.Began, b.resumed.Sub(start))
				if other == "" {
					other = f.c.stalledDuring(died, b.resumed)
				}
				if other == "" {
					alone = append(alone, d)
				} else {
					other = "; overlapped by " + other
				}
				t.Logf("replica %d %s at %.2fs: %s on %s (%s) broke after %s (%s), streaming again after %s (the try that did began %s after the break, its client's connection %s); %d failed tries, the last: %s%s", fr.Target, fr.Kind, fr.Began.Seconds(),
					f.session, f.machine.id, f.kind(), b.at.Sub(died).Round(time.Millisecond), b.err, d.Round(time.Millisecond), b.lastTry.Sub(b.at).Round(time.Millisecond), b.lastState, b.tries, b.lastErr, other)
				break
			}
			f.mu.Unlock()
		}
	}
	return all, alone
}

// overlaps names the first fault other than faults[self] that was under way
// between from and to on f's path: PostgreSQL, another replica's death, a
// fault on f's machine or its link; "" if none. A client's stall is not
// taken when the schedule asks but at the client's next event, so the
// caller checks the client's own record of it (client.stalledDuring).
func overlaps(faults []FaultRecord, self int, f *follower, from, to time.Duration) string {
	for k, o := range faults {
		if k == self || o.Ended < from || o.Began > to {
			continue
		}
		onPath := false
		switch o.Kind {
		case PGRestart, PGBlackhole, ReplicaKill, ReplicaDrain:
			onPath = true
		case AgentKill, TunnelBlackhole, Bandwidth, Slicer, ResetPeer:
			onPath = o.Target == f.machine.idx
		case Latency:
			onPath = o.Target == f.machine.idx || strings.HasPrefix(o.Note, "clients' link")
		}
		if onPath {
			return fmt.Sprintf("%s (target %d, %.2fs-%.2fs)", o.Kind, o.Target, o.Began.Seconds(), o.Ended.Seconds())
		}
	}
	return ""
}

// footprints scrapes every replica's goroutines, RSS and tunnels.
func footprints(t *testing.T, w *world) []RelayFootprint {
	t.Helper()
	var out []RelayFootprint
	for _, r := range w.relays {
		m, err := relayMetrics(t.Context(), r.metricsAddr)
		if err != nil {
			t.Fatalf("metrics of replica %d: %v", r.idx, err)
		}
		out = append(out, RelayFootprint{Replica: r.idx, GoroutinesBase: m["go_goroutines"], RSSBase: m["process_resident_memory_bytes"], TunnelsBase: m["betcode_relay_connected_machines"]})
	}
	return out
}

// footprintsAfter waits (up to 60 s) for each replica to come back near
// its base: goroutines at most base + 8 per extra tunnel + 60, RSS at most
// 1.5 × base + 64 MiB. A replica restarted during the run has no base of
// its own: it is held to the smallest base of the others.
func footprintsAfter(t *testing.T, w *world, base []RelayFootprint) []RelayFootprint {
	minG, minR := base[0].GoroutinesBase, base[0].RSSBase
	for _, b := range base {
		minG, minR = min(minG, b.GoroutinesBase), min(minR, b.RSSBase)
	}
	out := make([]RelayFootprint, len(base))
	deadline := time.Now().Add(60 * time.Second)
	for i, r := range w.relays {
		f := base[i]
		if r.restarts > 0 {
			f.GoroutinesBase, f.RSSBase, f.TunnelsBase = minG, minR, 0
		}
		for {
			m, err := relayMetrics(t.Context(), r.metricsAddr)
			if err == nil {
				f.Goroutine, f.RSS, f.Tunnels = m["go_goroutines"], m["process_resident_memory_bytes"], m["betcode_relay_connected_machines"]
				f.OK = f.Goroutine <= f.GoroutinesBase+8*max(0, f.Tunnels-f.TunnelsBase)+60 && f.RSS <= 1.5*f.RSSBase+64<<20
			}
			if f.OK || time.Now().After(deadline) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		out[i] = f
	}
	return out
}

// faultRunner applies faults and heals them.
type faultRunner struct {
	w       *world
	rec     *recorder
	start   time.Time
	clients []*client
	agents  int        // the schedule's: a Latency fault on target agents is on the clients' link
	pgMu    sync.Mutex // one PostgreSQL restart at a time
	// replicaMu holds one replica fault at a time: a drain or a restart
	// under load can outlast the schedule's slack, and two replicas are
	// always up or coming back.
	replicaMu sync.Mutex
}

func (fr *faultRunner) run(load context.Context, f Fault) {
	if !sleepCtx(load, time.Until(fr.start.Add(f.At))) {
		return
	}
	w := fr.w
	began := time.Since(fr.start)
	note := ""
	hold := func() { sleepCtx(context.Background(), f.For) }
	// withToxic holds a toxic on link for the fault's duration.
	withToxic := func(link *toxiproxy.Proxy, name, typ, stream string, attrs map[string]any) error {
		err := toxic(link, name, typ, stream, attrs)
		hold()
		removeToxic(link, name)
		return err
	}
	var err error
	switch f.Kind {
	case ReplicaKill, ReplicaDrain:
		fr.replicaMu.Lock()
		defer fr.replicaMu.Unlock()
		began = time.Since(fr.start) // after the previous replica fault
		r := w.relays[f.Target]
		p := r.proc()
		if f.Kind == ReplicaKill {
			p.kill()
			note = "kill -9"
		} else {
			w.lb.Drain(r.idx)
			p.term(90 * time.Second)
			note = fmt.Sprintf("drained, exited %d after %s", p.cmd.ProcessState.ExitCode(), (time.Since(fr.start) - began).Round(time.Millisecond))
			if p.cmd.ProcessState.ExitCode() != 0 {
				fr.rec.errorf("replica %d exited %d after SIGTERM", r.idx, p.cmd.ProcessState.ExitCode())
			}
		}
		hold()
		r.restarts++
		err = w.startRelay(r)
		w.lb.Up(r.idx)
	case PGRestart:
		fr.pgMu.Lock()
		err = w.pg.Restart(context.Background())
		fr.pgMu.Unlock()
	case PGBlackhole:
		err = withToxic(w.pgLink, "blackhole", "latency", "", map[string]any{"latency": f.For.Milliseconds()})
	case AgentKill:
		a := fr.agent(f.Target)
		a.proc().kill()
		a.kills++
		hold()
		err = w.startAgent(a)
	case TunnelBlackhole:
		err = withToxic(fr.agent(f.Target).link, "blackhole", "latency", "", map[string]any{"latency": f.For.Milliseconds()})
	case Latency:
		link := w.cliLink
		note = "clients' link"
		if f.Target < fr.agents { // not len(w.agents): it grows as machines enroll
			link, note = fr.agent(f.Target).link, "agent's link"
		}
		err = withToxic(link, "latency", "latency", "", map[string]any{"latency": 200, "jitter": 100})
	case Bandwidth:
		err = withToxic(fr.agent(f.Target).link, "bandwidth", "bandwidth", "", map[string]any{"rate": 32})
	case Slicer:
		err = withToxic(fr.agent(f.Target).link, "slicer", "slicer", "", map[string]any{"average_size": 32, "size_variation": 31, "delay": 1000})
	case ResetPeer:
		err = withToxic(fr.agent(f.Target).link, "reset", "reset_peer", "upstream", map[string]any{"timeout": 1000})
	case ClientStall:
		fr.clients[f.Target].stall <- f.For
		hold()
	}
	if err != nil {
		fr.rec.errorf("fault %v: %v", f, err)
		note += " error: " + err.Error()
	}
	fr.rec.fault(FaultRecord{Fault: f, Began: began, Ended: time.Since(fr.start), Note: note})
}

// agent is the schedule's target i: machine m00i. The agents start eight
// at a time and join w.agents in the order they happen to finish, so a
// position there names a different machine from run to run (a replayed
// seed hit other machines, and a fault on a stream's own machine was
// counted as on another's).
func (fr *faultRunner) agent(i int) *agentProc {
	fr.w.agentsMu.Lock()
	defer fr.w.agentsMu.Unlock()
	for _, a := range fr.w.agents {
		if a.idx == i && !a.enroll {
			return a
		}
	}
	panic(fmt.Sprintf("chaos: the schedule names agent %d, which the soak did not start", i))
}

// revocations creates a client token, uses it, revokes it and checks that
// every replica refuses it, over and over during the load.
type revocations struct {
	count    int
	max      time.Duration
	failures []string
}

func (rv *revocations) run(load context.Context, w *world, rec *recorder) {
	cc, err := w.dial(w.cliLink.Listen, w.admin)
	if err != nil {
		rec.errorf("revocations: %v", err)
		return
	}
	defer cc.Close()
	adm := pb.NewAdminServiceClient(cc)
	if err := retry(load, func(ctx context.Context) error {
		_, err := adm.CreateUser(ctx, &pb.CreateUserRequest{Id: "temp"})
		if status.Code(err) == codes.AlreadyExists {
			return nil
		}
		return err
	}); err != nil {
		rec.errorf("revocations: create user: %v", err)
		return
	}
	for i := 0; sleepCtx(load, 5*time.Second); i++ {
		var tok, id string
		if err := retry(load, func(ctx context.Context) error {
			r, err := adm.CreateToken(ctx, &pb.CreateTokenRequest{UserId: "temp", Name: fmt.Sprintf("t%d", i), TtlSeconds: 3600})
			if err == nil {
				tok, id = r.Token, r.GetInfo().GetId()
			}
			return err
		}); err != nil {
			continue
		}
		tc, err := w.dial(w.cliLink.Listen, tok)
		if err != nil {
			continue
		}
		if err := retry(load, func(ctx context.Context) error {
			_, err := pb.NewMachineServiceClient(tc).ListMachines(ctx, &pb.ListMachinesRequest{})
			return err
		}); err != nil {
			if load.Err() != nil {
				tc.Close()
				break // the run ended while it was still being tried (a fault under way)
			}
			rv.failures = append(rv.failures, fmt.Sprintf("a new token was refused: %v", err))
		}
		tc.Close()
		if err := retry(load, func(ctx context.Context) error {
			_, err := adm.RevokeToken(ctx, &pb.RevokeTokenRequest{TokenId: id})
			return err
		}); err != nil {
			continue
		}
		// Each replica, dialled directly, must refuse it; a call it still
		// accepts more than 2 s after the revocation is a failure.
		var mu sync.Mutex
		var checks sync.WaitGroup
		for _, r := range w.relays {
			checks.Go(func() {
				took, accepted, last := rv.refused(w, r, tok)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case took > 0 && last != nil:
					// The replica was down or restarting: it refused the
					// token at its first answer.
				case took > 0:
					rv.max = max(rv.max, took)
					if took > 2*time.Second {
						rec.errorf("replica %d refused revoked token %s only %s after the revocation", r.idx, id, took.Round(time.Millisecond))
					}
				default:
					rec.errorf("replica %d: no answer on revoked token %s within 30 s: %v", r.idx, id, last)
				}
				if accepted > 2*time.Second {
					rv.failures = append(rv.failures, fmt.Sprintf("replica %d accepted token %s %s after it was revoked", r.idx, id, accepted.Round(time.Millisecond)))
				}
			})
		}
		checks.Wait()
		rv.count++
	}
}

// refused polls replica r with tok until it refuses it (Unauthenticated);
// it returns how long after now that took (0: not within 30 s), the last
// time (since now) it accepted the token, and the last error.
func (rv *revocations) refused(w *world, r *replica, tok string) (took, accepted time.Duration, last error) {
	start := time.Now()
	rc, err := w.dial(r.addr, tok)
	if err != nil {
		return 0, 0, err
	}
	defer rc.Close()
	for time.Since(start) < 30*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := pb.NewMachineServiceClient(rc).ListMachines(ctx, &pb.ListMachinesRequest{})
		cancel()
		switch {
		case status.Code(err) == codes.Unauthenticated:
			return time.Since(start), accepted, last
		case err == nil:
			accepted = time.Since(start)
		default:
			last = err // the replica is down or restarting (a fault)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, accepted, last
}

var enrolledRE = regexp.MustCompile(`machine (m-[a-z2-7]+)`)

// enrollAgent enrolls a new machine for c's user with a join token (the
// admin CLI, through the PostgreSQL link) and betcode-agent enroll
// (through the balancer), starts it, and checks its owner reaches it.
func (w *world) enrollAgent(ctx context.Context, i int, c *client) error {
	var join string
	if err := retry(ctx, func(ctx context.Context) error {
		out, err := exec.CommandContext(ctx, w.bins.relay, "admin", "--data-dir", w.dir, "--database-url", w.dbURL,
			"enroll-token", "create", "--user", c.user, "--ttl", "10m").Output()
		if err != nil {
			return status.Errorf(codes.Unavailable, "enroll-token create: %v %s", err, stderrOf(err))
		}
		join = strings.TrimSpace(string(out))
		return nil
	}); err != nil {
		return err
	}
	a := &agentProc{idx: i, owner: c.user, enroll: true, home: filepath.Join(w.dir, fmt.Sprintf("home-e%d", i)), data: filepath.Join(w.dir, fmt.Sprintf("data-e%d", i))}
	sockDir, err := os.MkdirTemp("", "bce")
	if err != nil {
		return err
	}
	w.t.Cleanup(func() { os.RemoveAll(sockDir) })
	a.sock = filepath.Join(sockDir, "a.sock")
	a.link = w.proxy(fmt.Sprintf("enrolled-%d", i), w.lb.Addr())
	var out []byte
	if err := retry(ctx, func(ctx context.Context) error {
		cmd := exec.CommandContext(ctx, w.bins.agent, "enroll", "--relay", a.link.Listen, "--relay-ca", filepath.Join(w.pki, pki.CACertFile),
			"--name", fmt.Sprintf("enrolled-%d", i), "--data-dir", a.data)
		cmd.Env = append(os.Environ(), "BETCODE_JOIN_TOKEN="+join)
		out, err = cmd.CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "already used") {
				return fmt.Errorf("enroll: the join token was used by a try whose answer was lost: %s", out)
			}
			return status.Errorf(codes.Unavailable, "enroll: %v: %s", err, out)
		}
		return nil
	}); err != nil {
		return err
	}
	m := enrolledRE.FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("enroll said %q", out)
	}
	a.id = string(m[1])
	a.project = filepath.Join(a.home, "project-"+a.id)
	if err := os.MkdirAll(a.project, 0o755); err != nil {
		return err
	}
	if err := w.startAgent(a); err != nil {
		return err
	}
	w.agentsMu.Lock()
	w.agents = append(w.agents, a)
	w.agentsMu.Unlock()
	return retry(ctx, func(ctx context.Context) error {
		r, err := pb.NewMachineServiceClient(c.cc).GetMachine(ctx, &pb.GetMachineRequest{MachineId: a.id})
		if err == nil && r.Status != pb.MachineStatus_ONLINE {
			return status.Errorf(codes.Unavailable, "enrolled machine %s is %s", a.id, r.Status)
		}
		if err == nil {
			_, err = pb.NewAgentServiceClient(c.cc).ListSessions(onMachine(ctx, a.id), &pb.ListSessionsRequest{})
		}
		return err
	})
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
