package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "google.golang.org/genproto/googleapis/rpc/errdetails" // decodes ErrorInfo details
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

func recvUntil(t *testing.T, s interface {
	Recv() (*pb.AgentEvent, error)
}, pred func(*pb.AgentEvent) bool) []*pb.AgentEvent {
	t.Helper()
	var out []*pb.AgentEvent
	for {
		ev, err := s.Recv()
		if err != nil {
			t.Fatalf("recv after %d events: %v", len(out), err)
		}
		out = append(out, ev)
		if pred(ev) {
			return out
		}
	}
}

func isTurnComplete(ev *pb.AgentEvent) bool { return ev.GetTurnComplete() != nil }

func textOf(evs []*pb.AgentEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(ev.GetTextDelta().GetText())
	}
	return b.String()
}

func sessionOf(t *testing.T, evs []*pb.AgentEvent) string {
	for _, ev := range evs {
		if si := ev.GetSessionInfo(); si != nil {
			return si.SessionId
		}
	}
	t.Fatal("no SessionInfo")
	return ""
}

func checkSeq(t *testing.T, evs []*pb.AgentEvent) {
	t.Helper()
	for i, ev := range evs {
		if ev.Sequence != uint64(i+1) {
			t.Fatalf("event %d has sequence %d", i, ev.Sequence)
		}
	}
}

// TestMachinesSwitchAndConverseThroughRelay runs on both of the relay's
// HTTP/2 fronts: net/http's, and its own engine (--front engine), whose
// client also carries the calls on the agents' direct connections.
func TestMachinesSwitchAndConverseThroughRelay(t *testing.T) {
	for _, front := range []string{server.FrontNetHTTP, server.FrontEngine} {
		t.Run(strings.ReplaceAll(front, "/", "-"), func(t *testing.T) { testMachinesSwitchAndConverse(t, front) })
	}
}

func testMachinesSwitchAndConverse(t *testing.T, front string) {
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), front: front})
	m1 := w.startAgent("m1", w.addr)
	m2 := w.startAgent("m2", w.addr)
	cc := w.client()
	ctx := ctxT(t, 120*time.Second)
	machines := pb.NewMachineServiceClient(cc)

	list, err := machines.ListMachines(ctx, &pb.ListMachinesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	online := map[string]bool{}
	for _, m := range list.Machines {
		online[m.Id] = m.Status == pb.MachineStatus_ONLINE
	}
	if !online["m1"] || !online["m2"] || len(list.Machines) != 2 {
		t.Fatalf("machines = %v", list.Machines)
	}

	// No machine selected yet: a clear error.
	agentAPI := pb.NewAgentServiceClient(cc)
	if _, err := agentAPI.ListSessions(ctx, &pb.ListSessionsRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("call without a machine: %v", err)
	}

	h, err := pb.NewBetCodeHealthClient(cc).GetHealthDetails(ctx, &pb.HealthDetailsRequest{})
	if err != nil || h.OverallStatus != pb.ServingStatus_SERVING || len(h.Components) != 3 {
		t.Fatalf("relay health = %v, %v", h, err)
	}

	sw, err := machines.SwitchMachine(ctx, &pb.SwitchMachineRequest{MachineId: "m2"})
	if err != nil || sw.Machine.Id != "m2" || sw.PreviousMachineId != "" {
		t.Fatalf("switch = %v, %v", sw, err)
	}
	sw, err = machines.SwitchMachine(ctx, &pb.SwitchMachineRequest{MachineId: "m1"})
	if err != nil || sw.PreviousMachineId != "m2" {
		t.Fatalf("switch back = %v, %v", sw, err)
	}

	// A whole turn with a tool call, bidi through the relay, on m1.
	s, err := agentAPI.Converse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: m1.project, AllowedTools: []string{"Bash"}}}})
	s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "please RUNTOOL"}}})
	evs := recvUntil(t, s, isTurnComplete)
	checkSeq(t, evs)
	if !strings.Contains(textOf(evs), "Tool result received: done") {
		t.Fatalf("text = %q", textOf(evs))
	}
	if _, err := os.Stat(filepath.Join(m1.project, "created-by-tool.txt")); err != nil {
		t.Fatalf("the tool did not run on m1: %v", err)
	}
	s.CloseSend()

	// The session lives on m1, not on m2 (named per call).
	l1, err := agentAPI.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil || l1.Total != 1 || l1.Sessions[0].WorkingDirectory != m1.project {
		t.Fatalf("m1 sessions = %v, %v", l1, err)
	}
	l2, err := agentAPI.ListSessions(onMachine(ctx, "m2"), &pb.ListSessionsRequest{})
	if err != nil || l2.Total != 0 {
		t.Fatalf("m2 sessions = %v, %v", l2, err)
	}
	_ = m2

	// Unknown machine and an error status from the agent pass through.
	if _, err := agentAPI.ListSessions(onMachine(ctx, "nope"), &pb.ListSessionsRequest{}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown machine: %v", err)
	}
	r, err := agentAPI.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: "no-such-session"})
	if err == nil {
		_, err = r.Recv()
	}
	if status.Code(err) != codes.NotFound || !strings.Contains(errDetails(err), "SESSION_NOT_FOUND") {
		t.Fatalf("agent error through relay: %v (%s)", err, errDetails(err))
	}
}

func errDetails(err error) string {
	var b strings.Builder
	for _, d := range status.Convert(err).Details() {
		if m, ok := d.(proto.Message); ok {
			b.WriteString(prototext.Format(m))
		}
	}
	return b.String()
}

// resumeAll reads a session through the relay until its turn is complete,
// reconnecting (ResumeSession from the last sequence) whenever the stream
// breaks, as a client does.
func resumeAll(t *testing.T, ctx context.Context, api pb.AgentServiceClient, id string, have []*pb.AgentEvent) []*pb.AgentEvent {
	t.Helper()
	all := append([]*pb.AgentEvent(nil), have...)
	for ctx.Err() == nil {
		from := uint64(0)
		if len(all) > 0 {
			from = all[len(all)-1].Sequence
		}
		r, err := api.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id, FromSequence: from})
		if err != nil {
			continue
		}
		for {
			ev, err := r.Recv()
			if errors.Is(err, io.EOF) {
				return all
			}
			if err != nil {
				break // retry: relay or tunnel down
			}
			all = append(all, ev)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond): // client backoff between attempts
		}
	}
	t.Fatalf("gave up: %v", ctx.Err())
	return nil
}

func TestRelayRestartAndTunnelCutMidTurnLoseNothing(t *testing.T) {
	for _, how := range []string{"relay restart", "tunnel cut"} {
		t.Run(how, func(t *testing.T) {
			w := newWorld(t, "")
			proxy := newCutProxy(t, w.addr)
			m := w.startAgent("m1", proxy.addr())
			cc := w.client()
			api := pb.NewAgentServiceClient(cc)
			ctx := onMachine(ctxT(t, 180*time.Second), "m1")
			w.api.Enqueue(fakeapi.Reply{Deltas: fakeapi.NumberedDeltas(300), Delay: 10 * time.Millisecond})

			s, err := api.Converse(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: m.project}}})
			s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "long story"}}})
			n := 0
			seen := recvUntil(t, s, func(ev *pb.AgentEvent) bool {
				if ev.GetTextDelta() != nil {
					n++
				}
				return n == 30
			})
			id := sessionOf(t, seen)
			if how == "relay restart" {
				w.relay.kill()
				w.startRelay()
			} else {
				proxy.cut()
			}
			all := resumeAll(t, ctx, api, id, seen)
			checkSeq(t, all)
			if got, want := textOf(all), strings.Join(fakeapi.NumberedDeltas(300), ""); got != want {
				t.Fatalf("text after %s:\n got %q\nwant %q", how, got, want)
			}
			if !isTurnComplete(all[len(all)-2]) && !isTurnComplete(all[len(all)-1]) {
				t.Fatalf("turn not complete: %v", all[len(all)-1])
			}
		})
	}
}

// cutProxy is a TCP proxy in front of the relay whose connections can be
// cut, to break a tunnel without stopping either end.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func TestBufferedMessagesDeliveredOnceInOrderAfterAgentRestart(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			dbURL := ""
			if backend == "postgres" {
				dbURL = pgURL(t)
			}
			w := newWorld(t, dbURL)
			m := w.startAgent("m1", w.addr)
			api := pb.NewAgentServiceClient(w.client())
			ctx := onMachine(ctxT(t, 180*time.Second), "m1")

			s, err := api.Converse(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: m.project}}})
			s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "first"}}})
			id := sessionOf(t, recvUntil(t, s, isTurnComplete))
			s.CloseSend()

			m.proc.kill()
			w.relay.waitLine(t, `machine offline`, 30*time.Second)
			// Streams need the machine; QueueMessage is buffered.
			if _, err := api.ListSessions(ctx, &pb.ListSessionsRequest{}); status.Code(err) != codes.Unavailable || !strings.Contains(errDetails(err), "MACHINE_OFFLINE") {
				t.Fatalf("offline call: %v %s", err, errDetails(err))
			}
			for i := 1; i <= 3; i++ {
				resp, err := api.QueueMessage(ctx, &pb.QueueMessageRequest{SessionId: id, IdempotencyKey: "k" + strconv.Itoa(i),
					Message: &pb.UserMessage{Content: "queued number " + strconv.Itoa(i)}})
				if err != nil || !resp.Buffered {
					t.Fatalf("queue %d: %v, %v", i, resp, err)
				}
			}
			resp, err := api.QueueMessage(ctx, &pb.QueueMessageRequest{SessionId: id, IdempotencyKey: "k2", Message: &pb.UserMessage{Content: "queued number 2"}})
			if err != nil || !resp.Duplicate {
				t.Fatalf("repeat key: %v, %v", resp, err)
			}

			m.restart(w)
			// Each message reaches Claude once, in order. (The CLI may run
			// messages that arrive during a turn together as one turn.)
			want := []string{"first", "queued number 1", "queued number 2", "queued number 3"}
			if _, err := w.api.Wait(ctx, func(rs []fakeapi.Request) bool {
				return len(promptLines(rs)) >= len(want)
			}); err != nil {
				t.Fatalf("waiting for the buffered messages: %v (prompts so far %q)", err, promptLines(w.api.Requests()))
			}
			// The session settles: a history-only replay ends.
			all := resumeAll(t, ctx, api, id, nil)
			checkSeq(t, all)
			if got := promptLines(w.api.Requests()); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("prompts the model saw = %q, want %q", got, want)
			}
			// Nothing is left in the buffer: a second restart delivers nothing.
			m.restart(w)
			if _, err := api.ListSessions(ctx, &pb.ListSessionsRequest{}); err != nil {
				t.Fatal(err)
			}
			again := resumeAll(t, ctx, api, id, nil)
			if len(again) != len(all) {
				t.Fatalf("after a second restart the session has %d events, before %d", len(again), len(all))
			}
			if got := promptLines(w.api.Requests()); len(got) != len(want) {
				t.Fatalf("after a second restart the model saw %q", got)
			}
		})
	}
}

// promptLines are the user prompts of the main-loop requests, in order,
// once each: a turn's follow-up requests repeat its prompt, and merged
// messages arrive as lines of one prompt.
func promptLines(rs []fakeapi.Request) []string {
	var out []string
	last := ""
	for i := range rs {
		if !rs[i].MainLoop() {
			continue
		}
		p := rs[i].Prompt()
		if p == last {
			continue
		}
		last = p
		out = append(out, strings.Split(p, "\n")...)
	}
	return out
}

func TestStalledClientDoesNotSlowAnotherSession(t *testing.T) {
	w := newWorld(t, "")
	m := w.startAgent("m1", w.addr)
	api := pb.NewAgentServiceClient(w.client())
	ctx := onMachine(ctxT(t, 180*time.Second), "m1")

	newSession := func() (string, pb.AgentService_ConverseClient) {
		s, err := api.Converse(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: m.project}}})
		return sessionOf(t, recvUntil(t, s, func(ev *pb.AgentEvent) bool { return ev.GetSessionInfo() != nil })), s
	}
	idA, a := newSession()
	_, b := newSession()
	// A stalled watcher of session A: it never reads.
	stalled, err := api.ResumeSession(metadataFollow(ctx), &pb.ResumeSessionRequest{SessionId: idA})
	if err != nil {
		t.Fatal(err)
	}
	_ = stalled
	big := strings.Repeat("y", 2000)
	deltas := make([]string, 3000) // ~6 MB through the stalled stream
	for i := range deltas {
		deltas[i] = big
	}
	w.api.Enqueue(fakeapi.Reply{Deltas: deltas})
	a.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "flood A"}}})
	recvUntil(t, a, isTurnComplete) // A's own reader keeps up

	// Session B on the same tunnel still streams a whole turn promptly.
	w.api.Enqueue(fakeapi.Reply{Text: "B is fine"})
	start := time.Now()
	b.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "hello B"}}})
	evs := recvUntil(t, b, isTurnComplete)
	if textOf(evs) != "B is fine" {
		t.Fatalf("B text = %q", textOf(evs))
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("session B's turn took %s while another client stalled", d)
	}
}

func TestCertificatesFromAnotherCAOrExpiredAreRefused(t *testing.T) {
	w := newWorld(t, "")
	other := t.TempDir()
	if _, err := pki.Init(other, []string{"127.0.0.1"}, pki.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.IssueMachine(other, "intruder", pki.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.IssueMachine(w.pki, "old", pki.Options{Now: func() time.Time { return time.Now().Add(-48 * time.Hour) }, MachineLifetime: time.Hour}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		id, cert, key, reason string
	}{
		{"intruder", filepath.Join(other, pki.MachineCertFile("intruder")), filepath.Join(other, pki.MachineKeyFile("intruder")), "unknown authority"},
		{"old", filepath.Join(w.pki, pki.MachineCertFile("old")), filepath.Join(w.pki, pki.MachineKeyFile("old")), "expired"},
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			home := t.TempDir()
			sockDir, _ := os.MkdirTemp("", "bca")
			defer os.RemoveAll(sockDir)
			p := start(t, "agent "+c.id, []string{"HOME=" + home}, bin(t, "betcode-agent"), "serve",
				"--listen", "unix://"+filepath.Join(sockDir, "a.sock"), "--data-dir", t.TempDir(), "--claude-bin", claudePath(t),
				"--relay", w.addr, "--relay-ca", filepath.Join(w.pki, pki.CACertFile), "--machine-cert", c.cert, "--machine-key", c.key)
			p.waitLine(t, `relay link down`, 60*time.Second)
			w.relay.waitLine(t, `refused a connection.*`+c.reason, 30*time.Second)
			list, err := pb.NewMachineServiceClient(w.client()).ListMachines(ctxT(t, 30*time.Second), &pb.ListMachinesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Machines) != 0 {
				t.Fatalf("a refused machine is listed: %v", list.Machines)
			}
		})
	}
}

// A client resuming an idle session right after its machine came back (a
// relay restart) gets the stream's headers at once, although the session
// has nothing to send. The tunnel's first call goes over the tunnel stream
// (the direct connection is offered by that call; behind a load balancer
// an agent may not get one for a minute), and on that path the relay held
// a call's headers until its first message: the chaos soak saw seconds "to
// streaming again" after replica deaths, until the session's next event.
// Both fronts.
func TestResumeOnAFreshTunnelAnswersAtOnce(t *testing.T) {
	for _, front := range []string{server.FrontNetHTTP, server.FrontEngine} {
		t.Run(strings.ReplaceAll(front, "/", "-"), func(t *testing.T) {
			w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), front: front})
			m := w.startAgent("m1", w.addr)
			api := pb.NewAgentServiceClient(w.client())
			ctx := onMachine(ctxT(t, 120*time.Second), "m1")
			w.api.Enqueue(fakeapi.Reply{Text: "done"})
			s, err := api.Converse(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorkingDirectory: m.project}}})
			s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "hi"}}})
			id := sessionOf(t, recvUntil(t, s, isTurnComplete))
			s.CloseSend()
			// Everything the session holds, up to its idle end: the resume
			// below starts after its last event.
			r, err := api.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id})
			if err != nil {
				t.Fatal(err)
			}
			var last uint64
			for {
				ev, err := r.Recv()
				if err != nil {
					break
				}
				last = ev.Sequence
			}

			w.relay.kill()
			w.startRelay()
			w.relay.waitLine(t, `tunnel: machine online" machine_id=m1`, 60*time.Second)
			hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			r, err = api.ResumeSession(metadataFollow(hctx), &pb.ResumeSessionRequest{SessionId: id, FromSequence: last})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Header(); err != nil || hctx.Err() != nil {
				t.Fatalf("the resumed stream of an idle session got no headers within 20 s (err %v)", err)
			}
		})
	}
}
