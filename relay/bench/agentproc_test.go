package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/shared/mtls"
)

// The forwarding benchmarks run the agent as its own process (this test
// binary re-executed), so that "direct" is client process → agent process
// as in perf-baselines.md, and "relay" is client → relay → agent, three
// processes.
const agentModeEnv = "BETCODE_BENCH_AGENT_PROCESS"

// agentMain serves the benchmark service over TLS on 127.0.0.1:0 and
// through a tunnel to the relay, prints "ready ADDR", and exits when stdin
// closes. Configuration comes from BETCODE_BENCH_AGENT_* variables.
func agentMain() int {
	get := func(k string) string { return os.Getenv("BETCODE_BENCH_AGENT_" + k) }
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "bench agent:", err); return 1 }
	srvTLS, err := mtls.ServerConfig(get("SERVER_CERT"), get("SERVER_KEY"), "", mtls.RequireClientCert)
	if err != nil {
		return fail(err)
	}
	direct := newBenchServer(grpc.Creds(credentials.NewTLS(srvTLS)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	go direct.Serve(ln)
	defer direct.Stop()
	cfg, err := mtls.ClientConfig(get("CA"), get("CERT"), get("KEY"), "127.0.0.1")
	if err != nil {
		return fail(err)
	}
	tunneled := newBenchServer()
	defer tunneled.Stop()
	if err := serveChannels(tunneled, get("KEYS")); err != nil {
		return fail(err)
	}
	l, err := dialAgent(context.Background(), get("RELAY"), cfg, tunneled)
	if err != nil {
		return fail(err)
	}
	defer l.close()
	fmt.Printf("ready %s\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// startAgentProcess starts the benchmark agent for machine id against r and
// returns the address of its direct TLS listener.
func startAgentProcess(tb testing.TB, r *relayProc, id string) (directAddr string, pid int) {
	tb.Helper()
	if _, err := pki.IssueMachine(r.pki, id, pki.Options{Owner: "user:" + benchUser}); err != nil {
		tb.Fatal(err)
	}
	addr, pid, err := startChild(tb, agentModeEnv+"=1",
		"BETCODE_BENCH_AGENT_RELAY="+r.addr, "BETCODE_BENCH_AGENT_CA="+r.caFile(),
		"BETCODE_BENCH_AGENT_CERT="+filepath.Join(r.pki, pki.MachineCertFile(id)),
		"BETCODE_BENCH_AGENT_KEY="+filepath.Join(r.pki, pki.MachineKeyFile(id)),
		"BETCODE_BENCH_AGENT_SERVER_CERT="+filepath.Join(r.pki, pki.RelayCertFile),
		"BETCODE_BENCH_AGENT_SERVER_KEY="+filepath.Join(r.pki, pki.RelayKeyFile),
		keysEnv+"="+filepath.Join(r.pki, "e2ee"))
	if err != nil {
		tb.Fatalf("bench agent did not start: %v\nrelay log:\n%s", err, r.log())
	}
	return addr, pid
}

// startChild runs this test binary again with env added (the variable that
// picks its role first), ends it when the test ends (closing its stdin,
// killing it after 10 s), and returns the address its first line announces
// ("ready ADDR") and its pid.
func startChild(tb testing.TB, env ...string) (addr string, pid int, err error) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return "", 0, err
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if !ok {
		return "", 0, fmt.Errorf("it said %q", line)
	}
	return addr, cmd.Process.Pid, nil
}
