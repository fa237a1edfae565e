package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/relay/pki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/buildinfo"
	"github.com/betcode-dev/betcode/shared/claudecli"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// previousBuildBudget bounds building the previous release's three
// binaries from git (about 1 min on a warm build cache here).
const previousBuildBudget = 4 * time.Minute

// release is a set of the three binaries.
type release struct{ name, relay, agent, cli string }

// previousRelease builds betcode-relay, betcode-agent and betcode of the
// previous release (buildinfo.PreviousVersion, at PreviousCommit) from
// git, its tag when the clone has it, else its commit, into a directory
// removed when t ends.
func previousRelease(t *testing.T) release {
	t.Helper()
	start := time.Now()
	r, err := buildPrevious(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s from git in %s", buildinfo.PreviousVersion, time.Since(start).Round(time.Second))
	return r
}

func buildPrevious(dir string) (release, error) {
	ctx, cancel := context.WithTimeout(context.Background(), previousBuildBudget)
	defer cancel()
	root := repoRoot()
	rev := buildinfo.PreviousVersion + "^{commit}"
	if err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", rev).Run(); err != nil {
		rev = buildinfo.PreviousCommit
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", rev+"^{commit}").CombinedOutput(); err != nil {
		return release{}, fmt.Errorf("this clone lacks the previous release %s (commit %s), which the compatibility test builds: "+
			"fetch it with `git fetch --tags origin` (or `git fetch --unshallow` in a shallow clone): %v %s",
			buildinfo.PreviousVersion, buildinfo.PreviousCommit, err, out)
	}
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return release{}, err
	}
	archive := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, rev, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return release{}, fmt.Errorf("git archive %s: %v\n%s", rev, err, out)
	}
	r := release{name: buildinfo.PreviousVersion}
	for _, b := range []struct {
		pkg string
		out *string
	}{
		{"./relay/cmd/betcode-relay", &r.relay}, {"./agent/cmd/betcode-agent", &r.agent}, {"./agent/cmd/betcode", &r.cli},
	} {
		*b.out = filepath.Join(dir, filepath.Base(b.pkg))
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-X main.version="+buildinfo.PreviousVersion, "-o", *b.out, b.pkg)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(src, "go.work"), "GOFLAGS=-mod=readonly")
		if out, err := cmd.CombinedOutput(); err != nil {
			return release{}, fmt.Errorf("build %s of %s (within %s): %v\n%s", b.pkg, buildinfo.PreviousVersion, previousBuildBudget, err, out)
		}
	}
	return r, nil
}

// current is the binaries of this tree (bin builds them).
func current(t *testing.T) release {
	return release{name: "current", relay: bin(t, "betcode-relay"), agent: bin(t, "betcode-agent"), cli: bin(t, "betcode")}
}

// startOf starts agent binary path for machine a, end to end only
// (--relay-e2e required, a flag both releases know), and waits for its
// link.
func (a *agent) startOf(w *world, path string, wait string) {
	w.t.Helper()
	cert, key := filepath.Join(w.pki, pki.MachineCertFile(a.id)), filepath.Join(w.pki, pki.MachineKeyFile(a.id))
	env := append([]string{"HOME=" + a.home}, claudecli.Env(a.home, w.api.URL())...)
	a.proc = start(w.t, "agent "+a.id, env, path, "serve", "--listen", "unix://"+a.sock,
		"--data-dir", a.data, "--claude-bin", claudecli.Require(w.t), "--relay", a.relay, "--relay-ca", filepath.Join(w.pki, pki.CACertFile),
		"--machine-cert", cert, "--machine-key", key, "--machine-name", "name-"+a.id, "--log-level", "debug", "--drain-timeout", "0",
		"--relay-e2e", "required")
	a.proc.waitLine(w.t, wait, 60*time.Second)
}

// enrollOf enrolls machine a with the relay at a.relay through agent
// binary path and the join token join, then starts it from its enrollment
// alone (no relay flags), end to end only, and waits for its link: what a
// new machine does with `betcode-agent enroll`. It returns the machine id
// the relay gave it.
func (a *agent) enrollOf(w *world, path, join string) string {
	w.t.Helper()
	cmd := exec.Command(path, "enroll", "--relay", a.relay, "--relay-ca", filepath.Join(w.pki, pki.CACertFile),
		"--name", "name-"+a.id, "--data-dir", a.data)
	cmd.Env = append(cleanEnv(), "BETCODE_JOIN_TOKEN="+join)
	out, err := cmd.CombinedOutput()
	if err != nil {
		w.t.Fatalf("%s enroll: %v\n%s", path, err, out)
	}
	id := regexp.MustCompile(`machine (m-[a-z2-7]+)`).FindSubmatch(out)
	if id == nil {
		w.t.Fatalf("%s enroll said %q, want the machine id", path, out)
	}
	env := append([]string{"HOME=" + a.home}, claudecli.Env(a.home, w.api.URL())...)
	a.proc = start(w.t, "agent "+a.id, env, path, "serve", "--listen", "unix://"+a.sock, "--data-dir", a.data,
		"--claude-bin", claudecli.Require(w.t), "--log-level", "debug", "--drain-timeout", "0", "--relay-e2e", "required")
	a.proc.waitLine(w.t, `relay link up`, 60*time.Second)
	return string(id[1])
}

// pairAndChat pairs a new device running cli with machine a (whose
// agent binary is agentBin) and runs a conversation through the relay:
// what a user does first with a machine. It returns a conversation of
// that device with a again, which says what went wrong itself.
func pairAndChat(ctx context.Context, t *testing.T, w *world, a *agent, agentBin, cli string) (chatAgain func(t *testing.T)) {
	t.Helper()
	pair := exec.CommandContext(ctx, agentBin, "pair", "--agent", "unix://"+a.sock, "--no-qr")
	pair.Env = cleanEnv()
	stdout, err := pair.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	pairErr := &lockedBuffer{}
	pair.Stderr = pairErr
	if err := pair.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { pair.Process.Kill(); pair.Wait() }()
	sc := bufio.NewScanner(stdout)
	var code string
	var printed strings.Builder
	for code == "" && sc.Scan() {
		printed.WriteString(sc.Text() + "\n")
		if m := regexp.MustCompile(`^\s*betcode pair (\S+)$`).FindStringSubmatch(sc.Text()); m != nil {
			code = m[1]
		}
	}
	if code == "" {
		t.Fatalf("%s pair printed no code:\n%s%s", agentBin, printed.String(), pairErr.String())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	env := append(cleanEnv(), "XDG_CONFIG_HOME="+t.TempDir())
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, cli, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("pair", code, "--relay-ca", filepath.Join(w.pki, pki.CACertFile), "--name", "phone")
	if err != nil || !strings.Contains(out, "paired with name-"+a.id) {
		t.Fatalf("betcode pair (%s): %v\n%s", cli, err, out)
	}
	if strings.Contains(out, "untested client version") {
		t.Errorf("betcode pair (%s) warns: %s", cli, out)
	}
	chat := func(t *testing.T) {
		t.Helper()
		prompt, reply := marker("PROMPT"), marker("REPLY")
		w.api.Enqueue(fakeapi.Reply{Text: reply})
		out, err := run("chat", "--cwd", a.project, prompt)
		if err != nil || !strings.Contains(out, reply) {
			t.Fatalf("betcode chat through the relay (%s): %v\n%s", cli, err, out)
		}
		if strings.Contains(out, "untested client version") {
			t.Errorf("betcode chat (%s) warns: %s", cli, out)
		}
		if err := w.api.WaitPrompts(ctx, prompt); err != nil {
			t.Fatalf("the model never saw the prompt: %v", err)
		}
	}
	chat(t)
	return chat
}

// TestPreviousRelease is the compatibility policy of docs/upgrading.md:
// a relay and agents one release apart work together both ways. It
// builds the previous release from git and, on one PostgreSQL database:
//
//  1. the previous relay creates its schema and serves a current agent,
//     paired with a current client, end to end through the relay, and
//     another one that enrolls with a join token it made;
//  2. a rolling upgrade: the current relay starts as a second replica on
//     that database and migrates it while the previous one serves; a
//     paired device reaches a machine on the other replica, both ways
//     (each replica hands the call to the other);
//  3. the current relay alone on the migrated database (the user, their
//     token and the machine survive) serves the previous agent, paired
//     with the previous client and with a current one, and another that
//     enrolls with a join token it made;
//  4. the current relay with --min-agent-version above the previous
//     release refuses the previous agent, which logs what to install.
func TestPreviousRelease(t *testing.T) {
	prev := previousRelease(t)
	start := time.Now()
	cur := current(t)
	t.Logf("built the current binaries (-race) in %s", time.Since(start).Round(time.Second))
	start = time.Now()
	defer func() { t.Logf("the four phases took %s", time.Since(start).Round(time.Second)) }()
	ctx := ctxT(t, 4*time.Minute)
	// 1. The previous relay, a current agent and client. The operator
	// creates alice and a token of hers with the previous release's admin
	// command, as its schema stores them.
	w := &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), dbURL: pgtest.URL(t), relayBin: prev.relay, advertise: true}
	w.extraArgs = []string{"--ca-key", filepath.Join(w.pki, pki.CAKeyFile)} // it enrolls machines with join tokens
	w = newWorldOf(t, w)
	admin := func(args ...string) string {
		cmd := exec.CommandContext(ctx, prev.relay, append([]string{"admin"}, append(args, "--database-url", w.dbURL)...)...)
		cmd.Env = cleanEnv()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s betcode-relay admin %s: %v\n%s%s", prev.name, strings.Join(args, " "), err, out, stderr.String())
		}
		return strings.TrimSpace(string(out))
	}
	admin("user", "create", "alice")
	token := admin("token", "create", "--user", "alice", "--name", "laptop")
	if _, err := pki.IssueMachine(w.pki, "newer", pki.Options{Owner: "user:alice", Force: true}); err != nil {
		t.Fatal(err)
	}
	newer := w.newAgent("newer")
	newer.startOf(w, cur.agent, `relay link up`)
	chatNewer := pairAndChat(ctx, t, w, newer, cur.agent, cur.cli)
	// A current agent enrolls with a join token the previous relay made.
	enrolled := w.newAgent("enrolled-newer")
	t.Logf("a current agent enrolled with the previous relay as %s", enrolled.enrollOf(w, cur.agent, admin("enroll-token", "create", "--user", "alice", "--ttl", "10m")))
	pairAndChat(ctx, t, w, enrolled, cur.agent, cur.cli)
	enrolled.proc.stop()

	// 2. A rolling upgrade: the current relay joins as replica B and
	// migrates the database under the previous one, which keeps serving.
	bAddr, b := w.startReplicaOf(cur.relay, "relay B (current)")
	if _, err := pki.IssueMachine(w.pki, "moved", pki.Options{Owner: "user:alice", Force: true}); err != nil {
		t.Fatal(err)
	}
	// Previous to current: newer's device dials the previous replica (its
	// pairing names no other), and the machine is now on the current one
	// only: the conversation works only if the previous replica hands it
	// to the current one.
	newer.proc.stop()
	newer.relay = bAddr
	newer.startOf(w, cur.agent, `relay link up`)
	t.Run("rolling upgrade: previous replica to current", chatNewer)
	// Current to previous: a machine paired through the current replica
	// moves to the previous one.
	moved := w.newAgent("moved")
	moved.relay = bAddr
	moved.startOf(w, cur.agent, `relay link up`)
	chatMoved := pairAndChat(ctx, t, w, moved, cur.agent, cur.cli)
	moved.proc.stop()
	moved.relay = w.addr
	moved.startOf(w, cur.agent, `relay link up`)
	t.Run("rolling upgrade: current replica to previous", chatMoved)
	moved.proc.stop()
	newer.proc.stop()
	b.stop()
	w.relay.stop()

	if _, err := pki.IssueMachine(w.pki, "older", pki.Options{Owner: "user:alice", Force: true}); err != nil {
		t.Fatal(err)
	}

	// 3. The current relay alone on the migrated database, the previous
	// agent, the previous client and a current one.
	w.relayBin = cur.relay
	w.startRelay()
	older := w.newAgent("older")
	older.startOf(w, prev.agent, `relay link up`)
	machines, err := pb.NewMachineServiceClient(w.dial(w.addr, token)).ListMachines(ctx, &pb.ListMachinesRequest{})
	if err != nil {
		t.Fatalf("alice's token after the upgrade: %v", err)
	}
	ids := map[string]bool{}
	for _, m := range machines.GetMachines() {
		ids[m.GetId()] = true
	}
	if !ids["newer"] || !ids["older"] {
		t.Fatalf("machines after the upgrade = %v, want newer (registered with the previous relay) and older", machines.GetMachines())
	}
	pairAndChat(ctx, t, w, older, prev.agent, prev.cli)
	pairAndChat(ctx, t, w, older, prev.agent, cur.cli)
	// The previous agent enrolls with a join token the current relay made.
	enrolledOlder := w.newAgent("enrolled-older")
	t.Logf("the previous agent enrolled with the current relay as %s", enrolledOlder.enrollOf(w, prev.agent, strings.TrimSpace(w.admin(t, "enroll-token", "create", "--user", "alice", "--ttl", "10m"))))
	pairAndChat(ctx, t, w, enrolledOlder, prev.agent, prev.cli)
	enrolledOlder.proc.stop()

	// 4. An agent too old for the relay is told what to install.
	w.relay.stop()
	w.extraArgs = []string{"--min-agent-version", "v0.99.0"}
	w.startRelay()
	older.proc.waitLine(t, `requires betcode-agent >= v0\.99\.0 \(this is `+regexp.QuoteMeta(prev.name)+`\): install it with`, 60*time.Second)
}
