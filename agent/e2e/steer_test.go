package e2e

import (
	"context"
	"errors"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/claude"
	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/claudecli"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

func asClient(ctx context.Context, id string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, server.MDClientID, id)
}

func isSessionInfo(ev *pb.AgentEvent) bool { return ev.GetSessionInfo() != nil }

func TestInputLockMovesByRequestAndOnDisconnect(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	ctxA, cancelA := context.WithCancel(asClient(ctx, "alice"))
	defer cancelA()
	a := startConv(t, ctxA, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	id := sessionID(t, until(t, a, isSessionInfo))
	say(t, a, "first from alice") // alice takes the free lock
	until(t, a, isTurnComplete)

	b := startConv(t, asClient(ctx, "bob"), agent.API, &pb.StartConversation{SessionId: id})
	say(t, b, "bob tries")
	ev := until(t, b, func(ev *pb.AgentEvent) bool { return ev.GetError() != nil })
	e := last(ev).GetError()
	if e.Code != server.CodeNoInputLock || e.Details["holder_client_id"] != "alice" || last(ev).Sequence != 0 {
		t.Fatalf("bob without the lock got %v", last(ev))
	}
	resp, err := agent.API.RequestInputLock(asClient(ctx, "bob"), &pb.InputLockRequest{SessionId: id})
	if err != nil || !resp.Granted || resp.PreviousHolder != "alice" {
		t.Fatalf("RequestInputLock = %v, %v", resp, err)
	}
	say(t, a, "alice again")
	ev = until(t, a, func(ev *pb.AgentEvent) bool { return ev.GetError() != nil })
	if last(ev).GetError().Code != server.CodeNoInputLock {
		t.Fatalf("alice after losing the lock got %v", last(ev))
	}
	say(t, b, "bob now")
	until(t, b, isTurnComplete)
	b.CloseSend()
	drain(t, b) // bob leaves: the lock is free again
	say(t, a, "alice after bob left")
	evs := until(t, a, func(ev *pb.AgentEvent) bool {
		return isTurnComplete(ev) || ev.GetError().GetCode() == server.CodeNoInputLock
	})
	if !isTurnComplete(last(evs)) {
		t.Fatalf("alice could not send after bob disconnected: %v", last(evs))
	}
	if _, err := agent.API.RequestInputLock(ctx, &pb.InputLockRequest{SessionId: id}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("RequestInputLock without a client id: %v", err)
	}
}

func TestCompactionCountsAndCompactedReplay(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	id := sessionID(t, until(t, s, isSessionInfo))
	for _, p := range []string{"one", "two", "three"} {
		say(t, s, p)
		until(t, s, isTurnComplete)
	}
	// Busy sessions refuse.
	api.Enqueue(fakeapi.Reply{Deltas: fakeapi.NumberedDeltas(40), Delay: 50 * time.Millisecond})
	say(t, s, "long one")
	until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetTextDelta() != nil })
	if _, err := agent.API.CompactSession(ctx, &pb.CompactSessionRequest{SessionId: id}); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "Session has active turn") {
		t.Fatalf("compacting a busy session: %v", err)
	}
	until(t, s, isTurnComplete)
	full := drain(t, mustResume(t, ctx, agent.API, id, 0))
	before := len(full)

	resp, err := agent.API.CompactSession(ctx, &pb.CompactSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if int(resp.MessagesBefore) != before {
		t.Errorf("messages_before = %d, the log had %d", resp.MessagesBefore, before)
	}
	if resp.MessagesAfter >= resp.MessagesBefore {
		t.Errorf("messages_after = %d, not fewer than %d", resp.MessagesAfter, resp.MessagesBefore)
	}
	// A replay from before the boundary starts with a compacted snapshot,
	// then continues without gaps.
	replay := drain(t, mustResume(t, ctx, agent.API, id, 0))
	first := replay[0].GetSessionInfo()
	if first == nil || !first.IsCompacted {
		t.Fatalf("first replayed event = %v, want SessionInfo{is_compacted}", replay[0])
	}
	for i := 1; i < len(replay); i++ {
		if replay[i].Sequence != replay[i-1].Sequence+1 {
			t.Fatalf("gap after compaction at %d: %d then %d", i, replay[i-1].Sequence, replay[i].Sequence)
		}
	}
	if !strings.Contains(text(replay), "w39") {
		t.Errorf("the last exchange was not kept: %q", text(replay))
	}
	// The last exchange keeps its prompt; the agent's own /compact prompt
	// is not user input.
	var prompts []string
	for _, ev := range replay {
		if in := ev.GetUserInput(); in != nil {
			prompts = append(prompts, in.Content)
		}
	}
	if strings.Join(prompts, "|") != "long one" {
		t.Errorf("user inputs after compaction %q, want only the last exchange's", prompts)
	}
	// The live stream saw Claude's own /compact turn; then the session goes on.
	until(t, s, isTurnComplete)
	say(t, s, "after compaction")
	if got := text(until(t, s, isTurnComplete)); got != "Hello from the fake model." {
		t.Errorf("after compaction: %q", got)
	}
}

func mustResume(t *testing.T, ctx context.Context, api pb.AgentServiceClient, id string, from uint64) pb.AgentService_ResumeSessionClient {
	t.Helper()
	r, err := api.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id, FromSequence: from})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCancelMidStreamEndsTurnQuickly(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	say(t, s, "SLOW please")
	until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetTextDelta().GetText() != "" })
	start := time.Now()
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Cancel{Cancel: &pb.CancelRequest{Reason: "test"}}}); err != nil {
		t.Fatal(err)
	}
	evs := until(t, s, isTurnComplete)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cancel took %s", d)
	}
	if got := last(evs).GetTurnComplete().StopReason; got != "cancelled" {
		t.Errorf("stop_reason = %q", got)
	}
	say(t, s, "hello after cancel")
	if got := text(until(t, s, isTurnComplete)); got != "Hello from the fake model." {
		t.Errorf("after cancel: %q", got)
	}
}

var pidRE = regexp.MustCompile(`msg="claude: started" session_id=(\S+) pid=(\d+)`)

func TestRealCLIKilledMidTurnIsReportedAndResumes(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	api.Enqueue(fakeapi.Reply{Text: "Remember the word zebra."})
	say(t, s, "first turn")
	until(t, s, isTurnComplete)
	say(t, s, "SLOW please")
	until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetTextDelta().GetText() != "" })
	m := pidRE.FindAllStringSubmatch(agent.Log(), -1)
	if len(m) == 0 {
		t.Fatalf("no claude pid in the log:\n%s", agent.Log())
	}
	pid, _ := strconv.Atoi(m[len(m)-1][2])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	evs := until(t, s, isTurnComplete)
	var crash *pb.ErrorEvent
	for _, ev := range evs {
		if e := ev.GetError(); e != nil {
			crash = e
		}
	}
	if crash == nil || crash.Code != session.CodeSubprocessCrashed || last(evs).GetTurnComplete().StopReason != "crashed" {
		t.Fatalf("kill was reported as %v / %v", crash, last(evs))
	}
	say(t, s, "what was the word")
	evs = until(t, s, isTurnComplete)
	if text(evs) != "Hello from the fake model." {
		t.Fatalf("after restart: %q", text(evs))
	}
	reqs := api.Requests()
	hist := ""
	for _, msg := range reqs[len(reqs)-1].Conversation() {
		hist += msg.Text + "\n"
	}
	if !strings.Contains(hist, "Remember the word zebra.") {
		t.Errorf("the restarted CLI lost the history (no --resume?):\n%s", hist)
	}
}

func TestHungCLIIsStoppedAndReported(t *testing.T) {
	agent := testenv.StartAgent(t, testenv.AgentOptions{ClaudeBin: testenv.Binaries(t).FakeClaude, Args: []string{"--hang-timeout", "2s"}})
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	say(t, s, "HANG")
	evs := until(t, s, isTurnComplete)
	var crash *pb.ErrorEvent
	for _, ev := range evs {
		if e := ev.GetError(); e != nil {
			crash = e
		}
	}
	if crash == nil || crash.Code != session.CodeSubprocessCrashed || !strings.Contains(crash.Message, "no output") {
		t.Fatalf("hang reported as %v", crash)
	}
	say(t, s, "are you back")
	if got := text(until(t, s, isTurnComplete)); !strings.Contains(got, "Fake answer.") {
		t.Fatalf("after the hang: %q", got)
	}
}

func TestPoolLimit(t *testing.T) {
	agent := testenv.StartAgent(t, testenv.AgentOptions{ClaudeBin: testenv.Binaries(t).FakeClaude, Args: []string{"--max-processes", "1"}})
	ctx := ctxT(t)
	a := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	idA := sessionID(t, until(t, a, isSessionInfo))
	b := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	until(t, b, isSessionInfo)

	say(t, a, "HANG") // A's CLI is busy
	until(t, a, func(ev *pb.AgentEvent) bool { return ev.GetTextDelta() != nil })
	say(t, b, "hello")
	evs := until(t, b, func(ev *pb.AgentEvent) bool { return ev.GetError() != nil })
	e := last(evs).GetError()
	if e.Code != server.CodePoolExhausted || e.Details["retry_after_ms"] == "" {
		t.Fatalf("over the pool limit: %v", e)
	}
	// Once A is idle, its CLI makes room for B.
	if _, err := agent.API.CancelTurn(ctx, &pb.CancelTurnRequest{SessionId: idA}); err != nil {
		t.Fatal(err)
	}
	until(t, a, isTurnComplete)
	say(t, b, "hello again")
	if got := text(until(t, b, isTurnComplete)); got != "Fake answer." {
		t.Fatalf("B after A went idle: %q", got)
	}
	if !strings.Contains(agent.Log(), "pool full; stopping an idle Claude process") {
		t.Error("no idle process was stopped to make room")
	}
}

func TestAdoptSessionStartedInATerminal(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)
	// A user runs Claude Code by hand in the same account.
	p, err := claude.Start(ctx, claude.Options{Bin: claudecli.Require(t), Dir: dir,
		Env: append(claudecli.Env(agent.Opts.Home, api.URL()), "HOME="+agent.Opts.Home)})
	if err != nil {
		t.Fatal(err)
	}
	api.Enqueue(fakeapi.Reply{Text: "The secret is 42."})
	if err := p.SendUser(claude.UserContent{Text: "adopt me please"}, ""); err != nil {
		t.Fatal(err)
	}
	var cliSession string
	for {
		env, err := p.Next()
		if err != nil {
			t.Fatalf("terminal session: %v (stderr %s)", err, p.Stderr())
		}
		if env.SessionID != "" {
			cliSession = env.SessionID
		}
		if env.Type == claude.TypeResult {
			break
		}
	}
	p.CloseStdin()
	for {
		if _, err := p.Next(); errors.Is(err, io.EOF) || err != nil {
			break
		}
	}
	p.Wait()

	list, err := agent.API.ListLocalSessions(ctx, &pb.ListLocalSessionsRequest{WorkingDirectory: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Sessions) != 1 || list.Sessions[0].SessionId != cliSession || list.Sessions[0].FirstPrompt != "adopt me please" || list.Sessions[0].Adopted {
		t.Fatalf("local sessions = %v", list.Sessions)
	}
	ad, err := agent.API.AdoptSession(ctx, &pb.AdoptSessionRequest{SessionId: cliSession})
	if err != nil || ad.ImportedEvents == 0 || ad.Session.Id != cliSession {
		t.Fatalf("adopt = %v, %v", ad, err)
	}
	if _, err := agent.API.AdoptSession(ctx, &pb.AdoptSessionRequest{SessionId: cliSession}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("adopting twice: %v", err)
	}
	replay := drain(t, mustResume(t, ctx, agent.API, cliSession, 0))
	checkSequences(t, replay, 0)
	if !strings.Contains(text(replay), "The secret is 42.") {
		t.Fatalf("imported history = %q (%v)", text(replay), replay)
	}
	// Continue it from the agent: Claude gets the terminal session's history.
	s := startConv(t, ctx, agent.API, &pb.StartConversation{SessionId: cliSession})
	say(t, s, "what is the secret")
	until(t, s, isTurnComplete)
	reqs := api.Requests()
	hist := ""
	for _, m := range reqs[len(reqs)-1].Conversation() {
		hist += m.Text + "\n"
	}
	if !strings.Contains(hist, "adopt me please") || !strings.Contains(hist, "The secret is 42.") {
		t.Fatalf("the continued session lost its history:\n%s", hist)
	}
	list, _ = agent.API.ListLocalSessions(ctx, &pb.ListLocalSessionsRequest{WorkingDirectory: dir})
	if len(list.Sessions) != 1 || !list.Sessions[0].Adopted {
		t.Fatalf("after adoption: %v (a fork would show a second session)", list.Sessions)
	}
}

func TestAttachments(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	png, err := os.ReadFile("testdata/pixel.png")
	if err != nil {
		t.Fatal(err)
	}
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	until(t, s, isSessionInfo)
	s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "what is in these", Attachments: []*pb.Attachment{
		{Filename: "pixel.png", MimeType: "image/png", Data: png},
		{Filename: "notes.txt", MimeType: "text/plain", Data: []byte("remember the milk")},
	}}}})
	until(t, s, isTurnComplete)
	reqs := api.Requests()
	var kinds []string
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role != "user" {
			continue
		}
		for _, b := range m.Blocks {
			kinds = append(kinds, b.Type+":"+b.Text)
		}
	}
	joined := strings.Join(kinds, "|")
	if !strings.Contains(joined, "image:") || !strings.Contains(joined, "remember the milk") {
		t.Fatalf("the model got %q", joined)
	}
	s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "big", Attachments: []*pb.Attachment{
		{Filename: "huge.bin", MimeType: "image/png", Data: make([]byte, 2<<20)},
	}}}})
	ev := until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetError() != nil })
	if e := last(ev).GetError(); e.Code != server.CodeInvalidArgument || !strings.Contains(e.Message, "limit") {
		t.Fatalf("oversized attachment: %v", e)
	}
	s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "odd", Attachments: []*pb.Attachment{
		{Filename: "a.zip", MimeType: "application/zip", Data: []byte{0x50, 0x4b, 0xff, 0xfe}},
	}}}})
	ev = until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetError() != nil })
	if e := last(ev).GetError(); !strings.Contains(e.Message, "unsupported type") {
		t.Fatalf("unsupported attachment: %v", e)
	}
}

// Messages sent while a turn runs are queued; the CLI may run them as one
// turn. The session must still end idle (it counts messages per result).
func TestMessagesQueuedDuringATurnSettle(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	id := sessionID(t, until(t, s, isSessionInfo))
	api.Enqueue(fakeapi.Reply{Deltas: fakeapi.NumberedDeltas(20), Delay: 50 * time.Millisecond})
	say(t, s, "long first")
	until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetTextDelta().GetText() != "" })
	say(t, s, "second")
	say(t, s, "third")
	// A history-only replay ends once the session is idle: it must end.
	evs := drain(t, mustResume(t, ctx, agent.API, id, 0))
	if !isTurnComplete(evs[len(evs)-2]) {
		t.Fatalf("replay ended on %v", evs[len(evs)-2:])
	}
	var prompts []string
	for _, r := range api.Requests() {
		if r.MainLoop() {
			prompts = append(prompts, r.Prompt())
		}
	}
	joined := strings.Join(prompts, "\n")
	if !strings.Contains(joined, "second") || !strings.Contains(joined, "third") {
		t.Fatalf("the model never got the queued messages: %q", prompts)
	}
	list, err := agent.API.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil || list.Sessions[0].Status != "idle" {
		t.Fatalf("session status = %v, %v", list, err)
	}
}

func TestAutoCompactionAfterALargeTurn(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(), Args: []string{"--auto-compact-tokens", "5"}})
	ctx := ctxT(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	until(t, s, isSessionInfo)
	say(t, s, "one")
	until(t, s, isTurnComplete)
	// The fake model reports 12 input tokens per turn: past the threshold of
	// 5, so the agent compacts on its own once the turn is over.
	evs := until(t, s, func(ev *pb.AgentEvent) bool {
		return ev.GetStatusChange().GetStatus() == pb.AgentStatus_COMPACTING
	})
	if last(evs).GetStatusChange() == nil {
		t.Fatal("no COMPACTING status")
	}
	until(t, s, isTurnComplete) // Claude's own /compact turn
	var sawCompaction bool
	for _, r := range api.Requests() {
		sawCompaction = sawCompaction || r.Compaction()
	}
	if !sawCompaction {
		t.Error("Claude was never asked to compact its context")
	}
}

// A CLI whose turn ended but whose Agent-tool subagent still works in the
// background (Claude Code's default) is not idle: the full pool refuses
// another session rather than stopping that CLI and losing the subagent's
// work, and makes room once the subagent has ended.
func TestPoolKeepsBackgroundSubagents(t *testing.T) {
	api, proceed := delegatingAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(), Args: []string{"--max-processes", "1"}})
	ctx := testenv.Ctx(t, 3*time.Minute)
	a := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	say(t, a, delegateWord)
	bg, _ := agentCall(t, a)
	until(t, a, isTurnComplete)
	waitSubtasks(t, ctx, api, 1) // the subagent is at work, its parent's turn over

	b := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: agent.ProjectDir(t)})
	until(t, b, isSessionInfo)
	say(t, b, "hello")
	e := last(until(t, b, func(ev *pb.AgentEvent) bool { return ev.GetError() != nil })).GetError()
	if e.Code != server.CodePoolExhausted {
		t.Fatalf("B while A's background subagent works: %v", e)
	}
	if strings.Contains(agent.Log(), "pool full; stopping an idle Claude process") {
		t.Fatal("the CLI running a background subagent was stopped as idle")
	}

	let(t, ctx, proceed)
	until(t, a, isTaskEnd(bg.GetToolId(), pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_COMPLETED))
	until(t, a, isTurnComplete) // Claude Code's own turn telling the model
	say(t, b, "hello again")
	if got := text(until(t, b, isTurnComplete)); got == "" {
		t.Fatal("B got no answer once A's subagent had ended")
	}
	if !strings.Contains(agent.Log(), "pool full; stopping an idle Claude process") {
		t.Error("no idle process was stopped to make room")
	}
}
