package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/relay/limits"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/server"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// built is a binary of the relay module, built (no -race: this is what
// gets deployed) once per process.
type built struct {
	once sync.Once
	path string
	err  error
}

var relayBuild, fleetBuild built

// binary builds betcode-relay.
func binary(tb testing.TB) string { return relayBuild.get(tb, "./cmd/betcode-relay") }

// get builds the relay module's package pkg into a temp directory the
// first time.
func (b *built) get(tb testing.TB, pkg string) string {
	tb.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "betcode-relay-bench-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, filepath.Base(pkg))
		cmd := exec.Command("go", "build", "-o", b.path, pkg)
		cmd.Dir = filepath.Join(repoRoot(), "relay")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

// raiseFileLimit lifts the soft open-files limit to the hard one (as root,
// the hard one to need first); relay processes started afterwards inherit
// it.
func raiseFileLimit(tb testing.TB, need uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatal(err)
	}
	if lim.Max < need && os.Geteuid() == 0 {
		// root with CAP_SYS_RESOURCE may raise the hard limit (up to
		// fs.nr_open); a container may have dropped that capability.
		raised := syscall.Rlimit{Cur: need, Max: need}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			tb.Fatalf("open files limit %d < %d needed, and raising it failed (%v): run with a higher ulimit -Hn (a container: --ulimit nofile=%d, or CAP_SYS_RESOURCE)", lim.Max, need, err, need)
		}
		lim = raised
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			tb.Fatalf("raise the open files limit to %d: %v", lim.Max, err)
		}
	}
	if lim.Cur < need {
		tb.Fatalf("open files limit %d < %d needed; raise the hard limit (ulimit -Hn)", lim.Cur, need)
	}
}

// freeAddr returns a loopback address nobody listens on.
func freeAddr(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// relayProc is a betcode-relay serve process. Restarting keeps its address,
// PKI and store.
type relayProc struct {
	tb          testing.TB
	pki         string
	addr        string
	metricsAddr string
	dataDir     string
	dbURL       string
	env         []string
	args        []string // extra command-line arguments
	logPath     string
	token       string        // a client token of benchUser
	serving     chan struct{} // closed when the relay logs "relay serving"
	cmd         *exec.Cmd
	exited      chan struct{}
}

// relayEnv is the relay process's extra environment:
// BETCODE_BENCH_RELAY_ENV="K=V K2=V2" (GOMAXPROCS=1, GOGC=40, ...).
func relayEnv() []string { return strings.Fields(os.Getenv("BETCODE_BENCH_RELAY_ENV")) }

// newRelay starts a relay with a fresh PKI and store. The store is SQLite
// unless BETCODE_BENCH_STORE=postgres.
func newRelay(tb testing.TB, env ...string) *relayProc {
	tb.Helper()
	r := &relayProc{tb: tb, pki: tb.TempDir(), dataDir: tb.TempDir(), addr: freeAddr(tb), metricsAddr: freeAddr(tb), env: env}
	if _, err := pki.Init(r.pki, []string{"127.0.0.1", "localhost"}, pki.Options{}); err != nil {
		tb.Fatal(err)
	}
	if os.Getenv("BETCODE_BENCH_STORE") == "postgres" {
		r.dbURL = pgtest.URL(tb)
	}
	r.token = seedUser(tb, r.dbURL, r.dataDir)
	r.logPath = filepath.Join(r.dataDir, "relay.log")
	if os.Getenv("BETCODE_BENCH_INPROC") == "1" {
		r.startInProcess()
		return r
	}
	r.start()
	tb.Cleanup(r.stop)
	return r
}

// startInProcess runs the relay in this process (server.Run), so that
// -cpuprofile covers it. Only the forwarding benchmarks support it.
func (r *relayProc) startInProcess() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	r.serving = make(chan struct{})
	serving := r.serving
	go func() {
		done <- server.Run(ctx, server.Config{
			Listen: r.addr, MetricsListen: r.metricsAddr,
			TLSCert: filepath.Join(r.pki, pki.RelayCertFile), TLSKey: filepath.Join(r.pki, pki.RelayKeyFile),
			ClientCA: r.caFile(), DataDir: r.dataDir, DatabaseURL: r.dbURL,
			Calls:  limits.Config{CallsPerSecond: 1e9, Burst: 1e9, MaxStreamsPerToken: 1e5, MaxStreamsPerTunnel: 1e5},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Ready:  func(net.Addr) { close(serving) },
		})
	}()
	r.tb.Cleanup(func() { cancel(); <-done })
	r.exited = make(chan struct{})
	r.waitReady(60 * time.Second)
}

func (r *relayProc) caFile() string { return filepath.Join(r.pki, pki.CACertFile) }

func (r *relayProc) start() {
	tb := r.tb
	tb.Helper()
	args := []string{"serve", "--listen", r.addr, "--metrics-listen", r.metricsAddr,
		"--tls-cert", filepath.Join(r.pki, pki.RelayCertFile), "--tls-key", filepath.Join(r.pki, pki.RelayKeyFile),
		"--client-ca", r.caFile(), "--data-dir", r.dataDir, "--log-level", "info",
		// The benchmarks drive one token far past a person's call rate.
		"--rate-limit", "1e9", "--rate-burst", "1000000000", "--max-streams-per-token", "100000", "--max-streams-per-tunnel", "100000"}
	if r.dbURL != "" {
		args = append(args, "--database-url", r.dbURL)
	}
	args = append(args, r.args...)
	logf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	r.cmd = exec.Command(binary(tb), args...)
	r.cmd.Env = append(os.Environ(), r.env...)
	r.serving = make(chan struct{})
	watch := &lineWatch{want: []byte("relay serving"), seen: r.serving}
	r.cmd.Stdout, r.cmd.Stderr = logf, io.MultiWriter(logf, watch)
	// The relay dies with the benchmark process, whatever happens to it.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		logf.Close()
		tb.Fatal(err)
	}
	r.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		cmd.Wait() // also waits for the stderr copy, which writes to logf
		logf.Close()
		close(exited)
	}(r.cmd, r.exited)
	r.waitReady(60 * time.Second)
}

// waitReady waits until the relay logs that it serves (its TLS port and
// metrics listener are then open).
func (r *relayProc) waitReady(d time.Duration) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	select {
	case <-r.serving:
	case <-r.exited:
		r.tb.Fatalf("relay exited while starting:\n%s", r.log())
	case <-deadline.C:
		r.tb.Fatalf("relay not ready within %s:\n%s", d, r.log())
	}
}

// lineWatch closes seen the first time want is written.
type lineWatch struct {
	want []byte
	seen chan struct{}
	once sync.Once
}

func (w *lineWatch) Write(p []byte) (int, error) {
	if bytes.Contains(p, w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (r *relayProc) log() string {
	b, _ := os.ReadFile(r.logPath)
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}

// kill ends the relay at once (SIGKILL), as a crash would.
func (r *relayProc) kill() {
	select {
	case <-r.exited:
		return
	default:
	}
	r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.exited
}

func (r *relayProc) stop() {
	if r.cmd == nil {
		return
	}
	select {
	case <-r.exited:
		return
	default:
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(15 * time.Second):
		r.kill()
	}
}

// rssKiB reads the relay's VmRSS.
func (r *relayProc) rssKiB() int64 {
	pid := os.Getpid() // in process (BETCODE_BENCH_INPROC=1): the test's own
	if r.cmd != nil {
		pid = r.cmd.Process.Pid
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		r.tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				r.tb.Fatal(err)
			}
			return n
		}
	}
	r.tb.Fatal("no VmRSS in /proc status")
	return 0
}

// metrics scrapes the relay's /metrics and returns the unlabelled samples.
func (r *relayProc) metrics(ctx context.Context) (map[string]float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.metricsAddr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.Contains(line, "{") {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// connected returns betcode_relay_connected_machines.
func (r *relayProc) connected(ctx context.Context) (int, error) {
	m, err := r.metrics(ctx)
	if err != nil {
		return 0, err
	}
	v, ok := m["betcode_relay_connected_machines"]
	if !ok {
		return 0, fmt.Errorf("no betcode_relay_connected_machines in /metrics")
	}
	return int(v), nil
}

// waitConnected waits until the relay counts n tunnels.
func (r *relayProc) waitConnected(n int, d time.Duration) {
	r.tb.Helper()
	deadline := time.Now().Add(d)
	last := -1
	for time.Now().Before(deadline) {
		c, err := r.connected(context.Background())
		if err == nil && c == n {
			return
		}
		last = c
		time.Sleep(20 * time.Millisecond)
	}
	r.tb.Fatalf("relay counts %d tunnels, want %d, after %s", last, n, d)
}
