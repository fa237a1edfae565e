package chaos

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/server"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/shared/authtoken"
	"github.com/betcode-dev/betcode/shared/claudecli"
	"github.com/betcode-dev/betcode/shared/fakeapi"
	"github.com/betcode-dev/betcode/shared/mtls"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// bins are the binaries the soak runs, built once into a temp directory.
type bins struct{ relay, agent, fakeclaude string }

func buildBins(t *testing.T, race bool) bins {
	t.Helper()
	dir := t.TempDir()
	b := bins{filepath.Join(dir, "betcode-relay"), filepath.Join(dir, "betcode-agent"), filepath.Join(dir, "fakeclaude")}
	for _, x := range []struct {
		mod, pkg, out string
		race          bool
	}{
		{"relay", "./cmd/betcode-relay", b.relay, race},
		{"agent", "./cmd/betcode-agent", b.agent, false},
		{"agent", "./internal/fakeclaude", b.fakeclaude, false},
	} {
		args := []string{"build", "-o", x.out}
		if x.race {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, x.pkg)...)
		cmd.Dir = filepath.Join(repoRoot(), x.mod)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", x.pkg, err, out)
		}
	}
	return b
}

// proc is a started process logging to a file.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	log     *logFile
	exited  chan struct{}
	// expected is set before the schedule (or the end of the test) stops
	// the process: any other exit is a failure.
	expected atomic.Bool
}

func startProc(t *testing.T, name, logPath string, env []string, path string, args ...string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "=== start %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(args, " "))
	p := &proc{name: name, logPath: logPath, log: &logFile{f: f, wrote: make(chan struct{})}, exited: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.WaitDelay = 2 * time.Second // a child left holding the output does not hold up exited
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the exit.
func (p *proc) kill() {
	p.expected.Store(true)
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// term sends SIGTERM and waits up to d for the exit, then kills.
func (p *proc) term(d time.Duration) {
	p.expected.Store(true)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(d):
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	}
}

// logFile is a process's log file: each write wakes waitLog.
type logFile struct {
	f     *os.File
	mu    sync.Mutex
	wrote chan struct{} // closed, and replaced, at each write
}

func (l *logFile) Write(b []byte) (int, error) {
	n, err := l.f.Write(b)
	l.mu.Lock()
	close(l.wrote)
	l.wrote = make(chan struct{})
	l.mu.Unlock()
	return n, err
}

// written is closed at the next write.
func (l *logFile) written() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wrote
}

// waitLog waits, up to d, for a line matching re in the log after offset,
// reading it again at each write.
func (p *proc) waitLog(re *regexp.Regexp, offset int64, d time.Duration) error {
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	matched := func() bool {
		b, _ := os.ReadFile(p.logPath)
		return int64(len(b)) > offset && re.Match(b[offset:])
	}
	for {
		wrote := p.log.written()
		if matched() {
			return nil
		}
		select {
		case <-wrote:
		case <-p.exited: // its output is all written by then
			if matched() {
				return nil
			}
			return fmt.Errorf("%s exited while waiting for %q; log %s", p.name, re, p.logPath)
		case <-timeout.C:
			return fmt.Errorf("%s: no %q within %s; log %s", p.name, re, d, p.logPath)
		}
	}
}

func logSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// listenAddr is a free address for a listener the soak restarts on the same
// port: below Linux's ephemeral range (32768-60999), so that none of the
// thousands of outgoing connections a run makes takes it as its source
// port while the replica is down (bind: address already in use).
func listenAddr(t *testing.T) string {
	t.Helper()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			ln.Close()
			return ln.Addr().String()
		}
	}
	t.Fatal("no free port in 20000-32000")
	return ""
}

// replica is one relay replica.
type replica struct {
	idx         int
	addr        string
	metricsAddr string
	dataDir     string
	mu          sync.Mutex
	p           *proc
	restarts    int
}

func (r *replica) proc() *proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.p
}

// agentProc is one machine.
type agentProc struct {
	idx     int
	id      string
	owner   string
	real    bool // drives the real Claude Code CLI
	home    string
	project string
	data    string
	sock    string
	link    *toxiproxy.Proxy // agent -> balancer
	mu      sync.Mutex
	p       *proc
	kills   int
	enroll  bool // enrolled during the run (its credentials are in data)
	e2e     bool // on --relay-e2e required (the shipped default): its owner is a paired device
}

func (a *agentProc) proc() *proc {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.p
}

// world is the soak's system: PostgreSQL, the relays, the balancer, the
// agents, the fake model API and the fault proxies.
type world struct {
	t        *testing.T
	dir      string
	bins     bins
	claude   string // real CLI ("" when no agent uses it)
	pki      string
	pg       *pgtest.Cluster
	tox      *toxiproxy.ApiServer
	pgLink   *toxiproxy.Proxy
	cliLink  *toxiproxy.Proxy // clients -> balancer
	dbURL    string           // through pgLink
	directDB string
	relays   []*replica
	lb       *Balancer
	api      *fakeapi.Server
	agents   []*agentProc
	agentsMu sync.Mutex
	st       store.Store
	admin    string // an administrator's token
	log      *slog.Logger

	mu            sync.Mutex
	relayRestarts int // replicas started again by the supervisor after exiting at start
}

func newWorld(t *testing.T, cfg config) *world {
	t.Helper()
	w := &world{t: t, dir: t.TempDir(), pki: t.TempDir(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if os.Getenv("CHAOS_KEEP_LOGS") != "" {
		d, _ := os.MkdirTemp("", "betcode-chaos-")
		w.dir = d
		t.Logf("logs in %s", d)
	}
	w.bins = buildBins(t, cfg.race)
	if cfg.realAgents > 0 {
		w.claude = claudecli.Require(t)
	}
	if _, err := pki.Init(w.pki, []string{"localhost", "127.0.0.1"}, pki.Options{}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// PostgreSQL: the soak's own throwaway cluster (it restarts it),
	// never the machine's shared server.
	pg, err := pgtest.StartCluster(ctx)
	if err != nil {
		t.Fatalf("PostgreSQL for the soak (a throwaway cluster from /usr/lib/postgresql/*/bin; apt-get install postgresql): %v", err)
	}
	t.Cleanup(func() {
		if err := pg.Stop(); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
	})
	w.pg, w.directDB = pg, pg.URL
	zerolog.SetGlobalLevel(zerolog.Disabled) // toxics log with the global logger
	logger := zerolog.Nop()
	w.tox = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), logger)
	pgHost := strings.TrimPrefix(strings.Split(pg.URL, "@")[1], "")
	pgHost = pgHost[:strings.Index(pgHost, "/")]
	w.pgLink = w.proxy("pg", pgHost)
	w.dbURL = strings.Replace(pg.URL, pgHost, w.pgLink.Listen, 1)

	// The store's schema, the users and their tokens, set up as an
	// operator would before the relays start.
	st, err := server.OpenStore(ctx, w.directDB, w.dir, w.log)
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	w.st = st
	t.Cleanup(func() { st.Close() })
	if err := st.CreateUser(ctx, store.User{ID: "ops", Admin: true}); err != nil {
		t.Fatal(err)
	}
	w.admin = w.newToken("ops")

	api, err := fakeapi.Start(fakeapi.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	w.api = api

	addrs := make([]Target, cfg.replicas)
	for i := range cfg.replicas {
		r := &replica{idx: i, addr: listenAddr(t), metricsAddr: listenAddr(t), dataDir: t.TempDir()}
		addrs[i] = Target{Addr: r.addr, Ready: "http://" + r.metricsAddr + "/readyz"}
		w.relays = append(w.relays, r)
	}
	for _, r := range w.relays {
		if err := w.startRelay(r); err != nil {
			t.Fatal(err)
		}
	}
	lb, err := NewBalancer(addrs, 200*time.Millisecond, w.log)
	if err != nil {
		t.Fatal(err)
	}
	w.lb = lb
	w.cliLink = w.proxy("clients", lb.Addr())
	t.Cleanup(func() {
		w.stopAll()
		lb.Close()
		w.tox.Collection.Clear()
	})
	return w
}

// proxy starts a toxiproxy proxy to upstream on a free port.
func (w *world) proxy(name, upstream string) *toxiproxy.Proxy {
	w.t.Helper()
	p := toxiproxy.NewProxy(w.tox, name, "127.0.0.1:0", upstream)
	if err := w.tox.Collection.Add(p, true); err != nil {
		w.t.Fatalf("toxiproxy %s: %v", name, err)
	}
	return p
}

// toxic adds a toxic to p (both directions when stream is "").
func toxic(p *toxiproxy.Proxy, name, typ, stream string, attrs map[string]any) error {
	streams := []string{stream}
	if stream == "" {
		streams = []string{"upstream", "downstream"}
	}
	for _, s := range streams {
		j, err := json.Marshal(map[string]any{"name": name + "_" + s, "type": typ, "stream": s, "toxicity": 1, "attributes": attrs})
		if err != nil {
			return err
		}
		if _, err := p.Toxics.AddToxicJson(bytes.NewReader(j)); err != nil {
			return fmt.Errorf("toxic %s on %s: %w", name, p.Name, err)
		}
	}
	return nil
}

func removeToxic(p *toxiproxy.Proxy, name string) {
	for _, s := range []string{"upstream", "downstream"} {
		_ = p.Toxics.RemoveToxic(context.Background(), name+"_"+s)
	}
}

func (w *world) newToken(user string) string {
	w.t.Helper()
	tok, err := authtoken.New(authtoken.Client)
	if err != nil {
		w.t.Fatal(err)
	}
	h := authtoken.Hash(tok)
	if err := w.st.CreateToken(w.t.Context(), store.Token{ID: authtoken.ID(h), UserID: user, Name: "chaos", Hash: h}); err != nil {
		w.t.Fatal(err)
	}
	return tok
}

var servingRE = regexp.MustCompile(`relay serving`)

// startRelay starts replica r as its supervisor (Kubernetes) would: a
// replica that exits while starting (it cannot reach PostgreSQL, say) is
// started again, a second apart, up to 20 times.
func (w *world) startRelay(r *replica) error {
	var err error
	for range 20 {
		if err = w.startRelayOnce(r); err == nil {
			return nil
		}
		if p := r.proc(); p != nil && p.running() {
			return err // up but not serving: a real failure
		}
		w.mu.Lock()
		w.relayRestarts++
		w.mu.Unlock()
		time.Sleep(time.Second)
	}
	return err
}

// startRelayOnce starts replica r with the shipped settings (heartbeats,
// limits, drain grace), on its fixed address.
func (w *world) startRelayOnce(r *replica) error {
	args := []string{"serve", "--listen", r.addr, "--advertise-addr", r.addr, "--metrics-listen", r.metricsAddr,
		"--tls-cert", filepath.Join(w.pki, pki.RelayCertFile), "--tls-key", filepath.Join(w.pki, pki.RelayKeyFile),
		"--client-ca", filepath.Join(w.pki, pki.CACertFile), "--ca-key", filepath.Join(w.pki, pki.CAKeyFile),
		"--data-dir", r.dataDir, "--database-url", w.dbURL, "--log-level", "info"}
	logPath := filepath.Join(w.dir, fmt.Sprintf("relay-%d.log", r.idx))
	off := logSize(logPath)
	p, err := startProc(w.t, fmt.Sprintf("relay %d", r.idx), logPath, nil, w.bins.relay, args...)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.p = p
	r.mu.Unlock()
	// A relay starting while PostgreSQL is down or blackholed waits for
	// it; the schedule's PostgreSQL faults last seconds.
	return p.waitLog(servingRE, off, 90*time.Second)
}

var linkUpRE = regexp.MustCompile(`relay link up`)

// addAgent prepares machine i (owned by owner) and starts it.
func (w *world) addAgent(i int, owner string, real, e2e bool) (*agentProc, error) {
	id := fmt.Sprintf("m%03d", i)
	home := filepath.Join(w.dir, "home-"+id)
	sockDir, err := os.MkdirTemp("", "bcc")
	if err != nil {
		return nil, err
	}
	w.t.Cleanup(func() { os.RemoveAll(sockDir) })
	a := &agentProc{idx: i, id: id, owner: owner, real: real, e2e: e2e, home: home, project: filepath.Join(home, "project-"+id),
		data: filepath.Join(w.dir, "data-"+id), sock: filepath.Join(sockDir, "a.sock")}
	if err := os.MkdirAll(a.project, 0o755); err != nil {
		return nil, err
	}
	if _, err := pki.IssueMachine(w.pki, id, pki.Options{Owner: "user:" + owner, Force: true}); err != nil {
		return nil, fmt.Errorf("issue %s: %w", id, err)
	}
	a.link = w.proxy("agent-"+id, w.lb.Addr())
	w.agentsMu.Lock()
	w.agents = append(w.agents, a)
	w.agentsMu.Unlock()
	return a, w.startAgent(a)
}

func (w *world) startAgent(a *agentProc) error {
	cli, env := w.bins.fakeclaude, []string{"HOME=" + a.home}
	if a.real {
		cli, env = w.claude, claudecli.Env(a.home, w.api.URL())
	}
	args := []string{"serve", "--listen", "unix://" + a.sock, "--data-dir", a.data, "--claude-bin", cli,
		"--machine-name", "name-" + a.id, "--log-level", "info", "--drain-timeout", "0", "--http-listen", ""}
	if !a.e2e {
		// Most clients call machines through the relay in clear with a
		// relay login; the shipped default, required, serves paired
		// devices' channels only.
		args = append(args, "--relay-e2e", "optional")
	}
	if !a.enroll {
		args = append(args, "--relay", a.link.Listen, "--relay-ca", filepath.Join(w.pki, pki.CACertFile),
			"--machine-cert", filepath.Join(w.pki, pki.MachineCertFile(a.id)), "--machine-key", filepath.Join(w.pki, pki.MachineKeyFile(a.id)))
	}
	logPath := filepath.Join(w.dir, "agent-"+a.id+".log")
	off := logSize(logPath)
	p, err := startProc(w.t, "agent "+a.id, logPath, env, w.bins.agent, args...)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.p = p
	a.mu.Unlock()
	return p.waitLog(linkUpRE, off, 120*time.Second)
}

// stopAll stops every process (expected exits).
func (w *world) stopAll() {
	var wg sync.WaitGroup
	w.agentsMu.Lock()
	agents := append([]*agentProc(nil), w.agents...)
	w.agentsMu.Unlock()
	for _, a := range agents {
		if p := a.proc(); p != nil {
			wg.Go(func() { p.term(10 * time.Second) })
		}
	}
	wg.Wait()
	for _, r := range w.relays {
		if p := r.proc(); p != nil {
			wg.Go(func() { p.term(20 * time.Second) })
		}
	}
	wg.Wait()
}

// dial connects to addr as the holder of token, with the reconnection
// settings a client that wants to be back within a second uses.
func (w *world) dial(addr, token string) (*grpc.ClientConn, error) {
	cfg, err := w.clientTLS()
	if err != nil {
		return nil, err
	}
	return grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
		grpc.WithPerRPCCredentials(bearer(token)),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second}))
}

// clientTLS is a client's TLS configuration: the relay's CA.
func (w *world) clientTLS() (*tls.Config, error) {
	return mtls.ClientConfig(filepath.Join(w.pki, pki.CACertFile), "", "", "127.0.0.1")
}

// bearer sends "authorization: Bearer <token>" on every call.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }

// relayMetrics scrapes a replica's unlabelled samples.
func relayMetrics(ctx context.Context, addr string) (map[string]float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
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

// connected is the number of tunnels all replicas hold.
func (w *world) connected(ctx context.Context) (int, error) {
	n := 0
	var errs []error
	for _, r := range w.relays {
		m, err := relayMetrics(ctx, r.metricsAddr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n += int(m["betcode_relay_connected_machines"])
	}
	return n, errors.Join(errs...)
}

func storeUser(id string) store.User { return store.User{ID: id} }
