package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// rssSessions is how many idle sessions BenchmarkIdleRSS creates.
const rssSessions = 100

// BenchmarkIdleRSS measures the resident memory of a real betcode-agent
// process (built without -race, unlike the e2e tests' agent, since the race
// detector multiplies memory) holding 100 idle sessions. The sessions are
// created over the Unix socket with Converse StartConversation and never get
// a message, so no CLI runs; the fake CLI is --claude-bin only because the
// agent checks the binary's version at start.
//
// It reports VmRSS from /proc/PID/status, in MiB: of the fresh agent
// (empty), with the 100 sessions and a client stream attached to each
// (attached), and after those streams closed (idle, the target's figure),
// plus the peak (VmHWM). The measurement runs once per call whatever b.N is:
// run it with -benchtime 1x.
func BenchmarkIdleRSS(b *testing.B) {
	pid, conn := startAgentProcess(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	api := pb.NewAgentServiceClient(conn)

	b.ResetTimer()
	empty := settledRSS(b, pid, "VmRSS")
	streamCtx, closeStreams := context.WithCancel(ctx)
	work := b.TempDir()
	for i := range rssSessions {
		s, err := api.Converse(streamCtx)
		if err != nil {
			b.Fatal(err)
		}
		start := &pb.StartConversation{WorkingDirectory: work}
		if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: start}}); err != nil {
			b.Fatal(err)
		}
		if ev, err := s.Recv(); err != nil || ev.GetSessionInfo() == nil {
			b.Fatalf("session %d: first event %v, %v; want SessionInfo", i, ev, err)
		}
	}
	attached := settledRSS(b, pid, "VmRSS")
	closeStreams()
	list, err := api.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil || list.Total != rssSessions {
		b.Fatalf("ListSessions = %v, %v; want %d sessions", list, err, rssSessions)
	}
	idle := settledRSS(b, pid, "VmRSS")
	peak := settledRSS(b, pid, "VmHWM")
	if kids := children(b, pid); kids != "" {
		b.Fatalf("agent has child processes %s; no CLI should run", kids)
	}
	for range b.N {
	}
	b.StopTimer()
	b.ReportMetric(empty, "empty-MiB")
	b.ReportMetric(attached, "attached-MiB")
	b.ReportMetric(idle, "idle-MiB")
	b.ReportMetric(peak, "peak-MiB")
}

// settledRSS waits a second for the agent to settle, then returns field
// (VmRSS or VmHWM) of /proc/pid/status in MiB.
func settledRSS(b *testing.B, pid int, field string) float64 {
	b.Helper()
	time.Sleep(time.Second)
	kib, err := procKiB(pid, field)
	if err != nil {
		b.Fatal(err)
	}
	return kib / 1024
}

// children lists pid's child processes ("" for none).
func children(b *testing.B, pid int) string {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		b.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// startAgentProcess builds betcode-agent and the fake CLI without -race
// (the race detector multiplies memory and CPU) and starts the agent with
// testenv.StartAgent, logging at info (each event at debug would count in
// the figures), with args added to serve's; it returns the agent's pid and a
// client of it, both ended when b ends.
func startAgentProcess(b *testing.B, args ...string) (int, *grpc.ClientConn) {
	b.Helper()
	dir := b.TempDir()
	agentBin, fakeBin := filepath.Join(dir, "betcode-agent"), filepath.Join(dir, "fakeclaude")
	_, file, _, _ := runtime.Caller(0)
	for bin, pkg := range map[string]string{agentBin: "./cmd/betcode-agent", fakeBin: "./internal/fakeclaude"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Dir = filepath.Join(filepath.Dir(file), "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	home := filepath.Join(dir, "home")
	a := testenv.StartAgent(b, testenv.AgentOptions{Bin: agentBin, ClaudeBin: fakeBin, Home: home,
		Args: append([]string{"--log-level", "info"}, args...), Env: []string{"XDG_CONFIG_HOME=" + home, "XDG_DATA_HOME=" + home}})
	return a.Cmd.Process.Pid, a.Conn
}
