package e2e

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/claudecli"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// The orchestration that BenchmarkOrchestrationRSS runs: benchSteps
// independent steps whose turns each stream benchDeltas text deltas,
// benchDelay apart, once all of them have reached the model.
const (
	benchSteps  = 10
	benchDeltas = 200
	benchDelay  = 25 * time.Millisecond
	// rssSampleEvery is how often the agent's VmRSS is read.
	rssSampleEvery = 50 * time.Millisecond
)

// BenchmarkOrchestrationRSS measures the resident memory of a real
// betcode-agent process (built without -race) while it runs an
// orchestration of 10 parallel subagents on the real Claude Code CLI
// against the fake model API. Target (issue 12): under 60 MiB, not
// counting the CLI processes themselves.
//
// The agent runs with --feature-flag subagent_orchestration,
// --subagent-max-parallel 10 and room for 16 CLIs. One client creates the
// orchestration (10 steps, max_parallel 10) and watches it. The fake model
// holds every step's turn until all 10 have reached it — so all 10
// subagents are RUNNING at once, which the benchmark asserts from the
// watch stream — then streams each turn slowly (200 deltas, 25 ms apart).
//
// VmRSS of the agent's own pid (its children, the CLIs, are not in it) is
// sampled every 50 ms from the creation of the orchestration to its end.
// Reported, in MiB: the agent just started (fresh-MiB) and with the parent
// session, before the orchestration (idle-MiB); the median and the peak of
// the samples (median-MiB, peak-MiB: the target's figure) and the peak's
// anonymous and file-backed parts (peak-anon-MiB, peak-file-MiB: RssAnon,
// RssFile); the process's high-water mark (hwm-MiB); and for scale the
// summed VmRSS of its child processes at their peak (clis-MiB). Each op is
// one orchestration; run it with -benchtime 1x.
func BenchmarkOrchestrationRSS(b *testing.B) {
	agentBin := buildReleaseAgent(b)
	claude := testenv.RealClaude(b)
	g := &modelGate{}
	api, err := fakeapi.Start(fakeapi.Config{Responder: g.reply})
	if err != nil {
		b.Fatal(err)
	}
	defer api.Close()
	defer g.openAll()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	a := startReleaseAgent(b, ctx, agentBin, claude, api.URL(),
		"--feature-flag", server.SubagentOrchestration, "--subagent-max-parallel", strconv.Itoa(benchSteps), "--max-processes", "16")
	defer a.stop()
	conn, err := grpc.NewClient("unix://"+a.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	fresh, err := procKiB(a.pid(), "VmRSS")
	if err != nil {
		b.Fatal(err)
	}
	agentAPI, svc := pb.NewAgentServiceClient(conn), pb.NewSubagentServiceClient(conn)
	started, err := agentAPI.StartSession(ctx, &pb.StartSessionRequest{WorkingDirectory: a.home, Name: "coordinator"})
	if err != nil {
		b.Fatalf("StartSession: %v", err)
	}
	parent := started.GetSession().GetId()
	idle, err := procKiB(a.pid(), "VmRSS")
	if err != nil {
		b.Fatal(err)
	}

	var samples []rssSample
	var clis float64
	b.ResetTimer()
	for i := range b.N {
		s := &rssSampler{pid: a.pid()}
		stop := s.start()
		runParallelOrchestration(b, ctx, svc, api, g, parent, i)
		stop()
		if s.err != nil {
			b.Fatal(s.err)
		}
		samples = append(samples, s.agent...)
		clis = max(clis, s.clis)
	}
	b.StopTimer()
	hwm, err := procKiB(a.pid(), "VmHWM")
	if err != nil {
		b.Fatal(err)
	}
	slices.SortFunc(samples, func(x, y rssSample) int { return cmp.Compare(x.rss, y.rss) })
	peak := samples[len(samples)-1]
	b.ReportMetric(fresh/1024, "fresh-MiB")
	b.ReportMetric(idle/1024, "idle-MiB")
	b.ReportMetric(samples[len(samples)/2].rss/1024, "median-MiB")
	b.ReportMetric(peak.rss/1024, "peak-MiB")
	b.ReportMetric(peak.anon/1024, "peak-anon-MiB")
	b.ReportMetric(peak.file/1024, "peak-file-MiB")
	b.ReportMetric(hwm/1024, "hwm-MiB")
	b.ReportMetric(clis/1024, "clis-MiB")
	b.ReportMetric(float64(len(samples)), "samples")
}

// runParallelOrchestration creates the orchestration of iteration i,
// opens the model's gate once all its steps run and their turns reached
// the model, and watches it to its end. It fails unless the steps were
// all RUNNING at once and all completed.
func runParallelOrchestration(b *testing.B, ctx context.Context, svc pb.SubagentServiceClient, api *fakeapi.Server, g *modelGate,
	parent string, i int) {
	b.Helper()
	prefix := fmt.Sprintf("BENCH %d ", i)
	g.hold(prefix)
	req := &pb.CreateOrchestrationRequest{ParentSessionId: parent, Name: fmt.Sprintf("rss-%d", i), MaxParallel: benchSteps}
	var prompts []string
	for s := range benchSteps {
		p := fmt.Sprintf("%sstep %d", prefix, s)
		prompts = append(prompts, p)
		req.Steps = append(req.Steps, &pb.OrchestrationStep{Id: fmt.Sprintf("s%d", s), Spec: &pb.SubagentSpec{Name: fmt.Sprintf("s%d", s), Prompt: p}})
	}
	created, err := svc.CreateOrchestration(ctx, req)
	if err != nil {
		b.Fatalf("CreateOrchestration: %v", err)
	}
	w, err := svc.WatchOrchestration(ctx, &pb.WatchOrchestrationRequest{OrchestrationId: created.GetOrchestration().GetId()})
	if err != nil {
		b.Fatal(err)
	}

	// The gate opens once all steps are RUNNING (seen here) and all their
	// turns wait at the model (seen by the opener).
	allRunning := make(chan struct{})
	openerCtx, stopOpener := context.WithCancel(ctx)
	opened := make(chan error, 1)
	go func() {
		select {
		case <-allRunning:
		case <-openerCtx.Done():
			opened <- openerCtx.Err()
			return
		}
		_, err := api.Wait(openerCtx, func(reqs []fakeapi.Request) bool {
			n := 0
			for _, r := range reqs {
				if slices.Contains(prompts, r.Prompt()) {
					n++
				}
			}
			return n >= benchSteps
		})
		if err == nil {
			g.open(prefix)
		}
		opened <- err
	}()
	defer func() {
		stopOpener()
		<-opened
	}()

	status := map[string]pb.SubagentStatus{}
	peak := 0
	var final *pb.Orchestration
	for {
		m, err := w.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatalf("WatchOrchestration: %v", err)
		}
		if u := m.GetStepUpdate(); u != nil {
			status[u.GetStepId()] = u.GetStatus()
		}
		if s := m.GetSnapshot(); s != nil {
			final = s
			for _, st := range s.GetSteps() {
				status[st.GetStepId()] = st.GetStatus()
			}
		}
		running := 0
		for _, st := range status {
			if st == pb.SubagentStatus_SUBAGENT_STATUS_RUNNING {
				running++
			}
		}
		if running > peak {
			peak = running
			if peak == benchSteps {
				close(allRunning)
			}
		}
	}
	if peak != benchSteps {
		b.Fatalf("at most %d steps were RUNNING at once, want %d (is --subagent-max-parallel %d in force?)", peak, benchSteps, benchSteps)
	}
	if final.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_COMPLETED {
		b.Fatalf("the orchestration ended %v: %v", final.GetStatus(), final.GetSteps())
	}
}

// modelGate is the fake model's responder: a main-loop turn whose prompt
// starts with a held prefix waits until that prefix is opened, then
// streams slowly; every other request gets the keyword reply.
type modelGate struct {
	mu    sync.Mutex
	gates map[string]chan struct{}
}

func (g *modelGate) hold(prefix string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gates == nil {
		g.gates = map[string]chan struct{}{}
	}
	g.gates[prefix] = make(chan struct{})
}

func (g *modelGate) open(prefix string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.gates[prefix]; ok {
		close(c)
		delete(g.gates, prefix)
	}
}

// openAll releases every held turn (at the end, so that no handler
// outlives the benchmark).
func (g *modelGate) openAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for p, c := range g.gates {
		close(c)
		delete(g.gates, p)
	}
}

func (g *modelGate) reply(req *fakeapi.Request) fakeapi.Reply {
	p := req.Prompt()
	if !req.MainLoop() || req.LastToolResult() != nil || !strings.HasPrefix(p, "BENCH ") {
		return fakeapi.KeywordReply(req)
	}
	g.mu.Lock()
	var wait chan struct{}
	for prefix, c := range g.gates {
		if strings.HasPrefix(p, prefix) {
			wait = c
		}
	}
	g.mu.Unlock()
	if wait != nil {
		<-wait
	}
	return fakeapi.Reply{Deltas: fakeapi.NumberedDeltas(benchDeltas), Delay: benchDelay}
}

// rssSample is one reading of /proc/PID/status, in KiB: VmRSS and its
// anonymous (heap, stacks) and file-backed (the binary's pages) parts.
type rssSample struct{ rss, anon, file float64 }

// rssSampler reads the agent's memory, and the summed VmRSS of its child
// processes, every rssSampleEvery until stopped.
type rssSampler struct {
	pid   int
	agent []rssSample
	clis  float64 // KiB, the largest sum seen
	err   error
}

// start starts sampling; the returned func stops it and waits.
func (s *rssSampler) start() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(rssSampleEvery)
		defer t.Stop()
		for {
			if err := s.sample(); err != nil {
				s.err = err
				return
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

func (s *rssSampler) sample() error {
	var m rssSample
	for _, f := range []struct {
		name string
		v    *float64
	}{{"VmRSS", &m.rss}, {"RssAnon", &m.anon}, {"RssFile", &m.file}} {
		kib, err := procKiB(s.pid, f.name)
		if err != nil {
			return err
		}
		*f.v = kib
	}
	s.agent = append(s.agent, m)
	kids, err := childPIDs(s.pid)
	if err != nil {
		return err
	}
	var sum float64
	for _, child := range kids {
		if kib, err := procKiB(child, "VmRSS"); err == nil { // a child may have just exited
			sum += kib
		}
	}
	s.clis = max(s.clis, sum)
	return nil
}

// childPIDs lists pid's child processes. Each thread has its own list
// (/proc/PID/task/TID/children): a Go program starts processes from any
// of its threads.
func childPIDs(pid int) ([]int, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, fmt.Errorf("threads of %d: %w", pid, err)
	}
	var out []int
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue // the thread has exited
		}
		for _, f := range strings.Fields(string(data)) {
			if child, err := strconv.Atoi(f); err == nil {
				out = append(out, child)
			}
		}
	}
	return out, nil
}

// procKiB is field (VmRSS, VmHWM) of /proc/pid/status, in KiB.
func procKiB(pid int, field string) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read status of %d: %w", pid, err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("parse %q: %w", line, err)
			}
			return kib, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// buildReleaseAgent builds betcode-agent without -race: the race
// detector multiplies memory.
func buildReleaseAgent(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "betcode-agent")
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/betcode-agent")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/betcode-agent: %v\n%s", err, out)
	}
	return bin
}

// releaseAgent is an agent process started by startReleaseAgent.
type releaseAgent struct {
	cmd        *exec.Cmd
	sock, home string
	logs       sync.WaitGroup // the stderr reader
}

func (a *releaseAgent) pid() int { return a.cmd.Process.Pid }

// stop ends the agent (SIGTERM, then SIGKILL after 15 s) and waits for it
// and its log reader.
func (a *releaseAgent) stop() {
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan struct{})
	go func() {
		_ = a.cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = a.cmd.Process.Kill()
		<-exited
	}
	a.logs.Wait()
}

// startReleaseAgent starts the agent binary on a Unix socket with the
// real CLI pointed at the fake API, and waits until it serves.
func startReleaseAgent(b *testing.B, ctx context.Context, bin, claude, apiURL string, args ...string) *releaseAgent {
	b.Helper()
	dir := b.TempDir()
	sockDir, err := os.MkdirTemp("", "bc")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(sockDir) })
	a := &releaseAgent{sock: filepath.Join(sockDir, "agent.sock"), home: filepath.Join(dir, "home")}
	if err := os.MkdirAll(a.home, 0o700); err != nil {
		b.Fatal(err)
	}
	a.cmd = exec.Command(bin, append([]string{"serve", "--listen", "unix://" + a.sock, "--data-dir", filepath.Join(dir, "data"),
		"--claude-bin", claude, "--log-level", "info", "--http-listen", "", "--drain-timeout", "0"}, args...)...)
	a.cmd.Env = append(os.Environ(), claudecli.Env(a.home, apiURL)...)
	stderr, err := a.cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	ready, eof := make(chan struct{}), make(chan struct{})
	var tail []string // the last lines, for a failure to start
	var mu sync.Mutex
	a.logs.Add(1)
	go func() {
		defer a.logs.Done()
		defer close(eof)
		// Read until the agent exits, so that its stderr never fills.
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		signalled := false
		for sc.Scan() {
			mu.Lock()
			tail = append(tail[max(0, len(tail)-20):], sc.Text())
			mu.Unlock()
			if !signalled && strings.Contains(sc.Text(), "agent serving") {
				close(ready)
				signalled = true
			}
		}
	}()
	select {
	case <-ready:
	case <-eof:
		a.stop()
		mu.Lock()
		defer mu.Unlock()
		b.Fatalf("agent exited before serving (is every setting known to it, e.g. --subagent-max-parallel?):\n%s", strings.Join(tail, "\n"))
	case <-ctx.Done():
		a.stop()
		mu.Lock()
		defer mu.Unlock()
		b.Fatalf("agent did not start: %v\n%s", ctx.Err(), strings.Join(tail, "\n"))
	case <-time.After(60 * time.Second):
		a.stop()
		mu.Lock()
		defer mu.Unlock()
		b.Fatalf("agent did not start within 60s:\n%s", strings.Join(tail, "\n"))
	}
	return a
}
