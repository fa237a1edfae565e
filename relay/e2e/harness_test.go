package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/server"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/shared/authtoken"
	"github.com/betcode-dev/betcode/shared/claudecli"
	"github.com/betcode-dev/betcode/shared/fakeapi"
	"github.com/betcode-dev/betcode/shared/mtls"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// bin builds the relay (with -race) and the agent once per test process.
func bin(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "betcode-relay-e2e-")
		if buildErr != nil {
			return
		}
		for _, b := range []struct{ dir, pkg, out string }{
			{"relay", "./cmd/betcode-relay", "betcode-relay"},
			{"agent", "./cmd/betcode-agent", "betcode-agent"},
			{"agent", "./cmd/betcode", "betcode"},
		} {
			cmd := exec.Command("go", "build", "-race", "-o", filepath.Join(binDir, b.out), b.pkg)
			cmd.Dir = filepath.Join(repoRoot(), b.dir)
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, name)
}

// proc is a started process whose stderr is watched for lines.
type proc struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	log    strings.Builder
	lines  chan string
	exited chan struct{}
}

func start(t *testing.T, name string, env []string, path string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	return startCmd(t, name, cmd)
}

// startCmd starts cmd (whose Stderr it takes) as a proc.
func startCmd(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{name: name, cmd: cmd, lines: make(chan string, 4096), exited: make(chan struct{})}
	pr, pw := io.Pipe()
	p.cmd.Stderr = pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		p.cmd.Wait()
		pw.Close()
		<-scanned // Log holds every line once exited is closed
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.Log())
		}
	})
	return p
}

func (p *proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// waitLine waits for a stderr line matching re and returns its submatches.
func (p *proc) waitLine(t *testing.T, re string, d time.Duration) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		select {
		case l := <-p.lines:
			if m := rx.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-p.exited:
			t.Fatalf("%s exited while waiting for %q:\n%s", p.name, re, p.Log())
		case <-deadline.C:
			t.Fatalf("%s: no line matching %q within %s:\n%s", p.name, re, d, p.Log())
		}
	}
}

func (p *proc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		p.kill()
	}
}

// world is a PKI, a fake model API and a relay.
type world struct {
	t       *testing.T
	pki     string
	api     *fakeapi.Server
	addr    string // relay host:port
	relay   *proc
	dataDir string
	dbURL   string
	// advertise starts the relay with --advertise-addr (one of several
	// replicas).
	advertise bool
	// extraArgs are added to the relay's command line.
	extraArgs []string
	// front, if set, is every replica's --front.
	front string
	// relayBin, if set, is the betcode-relay to run (another release's);
	// default this tree's.
	relayBin string

	stOnce sync.Once
	st     store.Store
	tokMu  sync.Mutex
	tokens map[string]string // user -> a token of theirs
}

func newWorld(t *testing.T, dbURL string) *world {
	t.Helper()
	return newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), dbURL: dbURL})
}

func newWorldOf(t *testing.T, w *world) *world {
	t.Helper()
	if _, err := pki.Init(w.pki, []string{"localhost", "127.0.0.1"}, pki.Options{}); err != nil {
		t.Fatal(err)
	}
	api, err := fakeapi.Start(fakeapi.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	w.api = api
	w.addr = freePort(t)
	w.startRelay()
	return w
}

// serveArgs is betcode-relay serve's command line for a relay on addr with
// the PKI in pkiDir and its data in dataDir.
func serveArgs(pkiDir, addr, dataDir string) []string {
	return []string{"serve", "--listen", addr, "--tls-cert", filepath.Join(pkiDir, pki.RelayCertFile),
		"--tls-key", filepath.Join(pkiDir, pki.RelayKeyFile), "--client-ca", filepath.Join(pkiDir, pki.CACertFile),
		"--data-dir", dataDir, "--heartbeat-interval", "1s", "--log-level", "debug"}
}

func (w *world) startRelay() {
	args := serveArgs(w.pki, w.addr, w.dataDir)
	if w.dbURL != "" {
		args = append(args, "--database-url", w.dbURL)
	}
	if w.advertise {
		args = append(args, "--advertise-addr", w.addr)
	}
	if w.front != "" {
		args = append(args, "--front", w.front)
	}
	args = append(args, w.extraArgs...)
	path, name := w.relayBin, "relay "+filepath.Base(filepath.Dir(w.relayBin))
	if path == "" {
		path, name = bin(w.t, "betcode-relay"), "relay"
	}
	w.relay = start(w.t, name, nil, path, args...)
	w.relay.waitLine(w.t, `relay serving`, 60*time.Second)
}

// agent is one machine.
type agent struct {
	id      string
	proc    *proc
	home    string
	project string
	data    string
	sock    string
	relay   string
	args    []string // added to betcode-agent serve's command line
}

// store opens the relay's store in the test process (the same database the
// relay uses), to set up users and tokens as an operator would.
func (w *world) store() store.Store {
	w.stOnce.Do(func() {
		st, err := server.OpenStore(context.Background(), w.dbURL, w.dataDir, slog.New(slog.DiscardHandler))
		if err != nil {
			w.t.Fatal(err)
		}
		w.st = st
		w.t.Cleanup(func() { st.Close() })
	})
	return w.st
}

// user creates user name (once) and returns a new client token of theirs.
func (w *world) token(name string) string {
	w.t.Helper()
	ctx := context.Background()
	st := w.store()
	if err := st.CreateUser(ctx, store.User{ID: name}); err != nil && !errors.Is(err, store.ErrExists) {
		w.t.Fatal(err)
	}
	return w.newToken(name, time.Time{})
}

// newToken stores a token of user name expiring at exp (zero: never).
func (w *world) newToken(name string, exp time.Time) string {
	w.t.Helper()
	tok, err := authtoken.New(authtoken.Client)
	if err != nil {
		w.t.Fatal(err)
	}
	h := authtoken.Hash(tok)
	if err := w.store().CreateToken(context.Background(), store.Token{ID: authtoken.ID(h), UserID: name, Name: "e2e", Hash: h, ExpiresAt: exp}); err != nil {
		w.t.Fatal(err)
	}
	return tok
}

// userToken returns a (cached) token of user name.
func (w *world) userToken(name string) string {
	w.tokMu.Lock()
	defer w.tokMu.Unlock()
	if w.tokens == nil {
		w.tokens = map[string]string{}
	}
	if w.tokens[name] == "" {
		w.tokens[name] = w.token(name)
	}
	return w.tokens[name]
}

// machineCert issues machine id's certificate, owned by alice.
func (w *world) machineCert(id string) (cert, key string) {
	return w.machineCertOf(id, "user:alice")
}

// machineCertOf issues machine id's certificate naming owner ("user:NAME",
// "team:NAME", or "" for none).
func (w *world) machineCertOf(id, owner string) (cert, key string) {
	w.t.Helper()
	if strings.HasPrefix(owner, "user:") {
		w.userToken(strings.TrimPrefix(owner, "user:"))
	}
	if _, err := pki.IssueMachine(w.pki, id, pki.Options{Owner: owner, Force: true}); err != nil {
		w.t.Fatal(err)
	}
	return filepath.Join(w.pki, pki.MachineCertFile(id)), filepath.Join(w.pki, pki.MachineKeyFile(id))
}

// startAgent starts an agent for machine id that dials relayAddr (the relay,
// or a proxy in front of it).
func (w *world) startAgent(id, relayAddr string) *agent {
	w.t.Helper()
	cert, key := w.machineCert(id)
	a := w.newAgent(id)
	a.relay = relayAddr
	a.start(w, cert, key)
	return a
}

// startE2EAgent starts machine id on the world's relay serving relayed calls
// only inside end-to-end channels (--relay-e2e required), with extra flags.
func (w *world) startE2EAgent(id string, extra ...string) *agent {
	w.t.Helper()
	a := w.newAgent(id)
	a.args = append([]string{"--relay-e2e", "required"}, extra...)
	cert, key := w.machineCert(id)
	a.start(w, cert, key)
	return a
}

// newAgent prepares (without starting) machine id dialing the relay.
func (w *world) newAgent(id string) *agent {
	home := w.t.TempDir()
	sockDir, _ := os.MkdirTemp("", "bca")
	w.t.Cleanup(func() { os.RemoveAll(sockDir) })
	a := &agent{id: id, home: home, project: filepath.Join(home, "project-"+id), data: w.t.TempDir(), sock: filepath.Join(sockDir, "a.sock"), relay: w.addr}
	os.MkdirAll(a.project, 0o755)
	return a
}

func (a *agent) start(w *world, cert, key string) {
	claude := claudecli.Require(w.t)
	env := append([]string{"HOME=" + a.home}, claudecli.Env(a.home, w.api.URL())...)
	args := append([]string{"serve", "--listen", "unix://" + a.sock,
		"--data-dir", a.data, "--claude-bin", claude, "--relay", a.relay, "--relay-ca", filepath.Join(w.pki, pki.CACertFile),
		"--machine-cert", cert, "--machine-key", key, "--machine-name", "name-" + a.id, "--log-level", "debug", "--drain-timeout", "0",
		// Most tests here call the machine through the relay in clear, with
		// a relay login; the end-to-end tests pass --relay-e2e required
		// (the default) in a.args, which comes later and wins.
		"--relay-e2e", "optional"}, a.args...)
	a.proc = start(w.t, "agent "+a.id, env, bin(w.t, "betcode-agent"), args...)
	// The agent reports the link up once the relay confirmed the tunnel.
	a.proc.waitLine(w.t, `relay link up`, 60*time.Second)
}

// restart kills machine a and starts it again.
func (a *agent) restart(w *world) {
	a.proc.kill()
	a.startAgain(w)
}

// startAgain starts machine a (stopped) again with the certificate it was issued.
func (a *agent) startAgain(w *world) {
	a.start(w, filepath.Join(w.pki, pki.MachineCertFile(a.id)), filepath.Join(w.pki, pki.MachineKeyFile(a.id)))
}

// client dials the relay as alice, the owner of the machines startAgent
// starts (TLS, no client certificate, alice's bearer token).
func (w *world) client() *grpc.ClientConn {
	w.t.Helper()
	return w.clientTo(w.addr)
}

// clientTo dials the relay (replica) at addr as alice.
func (w *world) clientTo(addr string) *grpc.ClientConn {
	w.t.Helper()
	return w.dial(addr, w.userToken("alice"))
}

// dial connects to addr sending token ("" sends none).
func (w *world) dial(addr, token string) *grpc.ClientConn {
	w.t.Helper()
	cfg, err := mtls.ClientConfig(filepath.Join(w.pki, pki.CACertFile), "", "", "127.0.0.1")
	if err != nil {
		w.t.Fatal(err)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { cc.Close() })
	return cc
}

func onMachine(ctx context.Context, id string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-betcode-machine-id", id)
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var _ = tls.VersionTLS13

// bearer sends "authorization: Bearer <token>" on every call.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }
