package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/relay/pki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// deviceSecrets reads a paired device's channel key and relay token from
// its config directory, as the betcode CLI keeps them.
func deviceSecrets(t *testing.T, d *device) (e2ee.KeyPair, string) {
	t.Helper()
	for _, kv := range d.env {
		if dir, ok := strings.CutPrefix(kv, "XDG_CONFIG_HOME="); ok {
			key, err := e2ee.LoadOrCreateKey(filepath.Join(dir, "betcode", "device.key"))
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, "betcode", "pairings.json"))
			if err != nil {
				t.Fatal(err)
			}
			m := regexp.MustCompile(`"token": "([^"]+)"`).FindSubmatch(b)
			if m == nil {
				t.Fatal("no token in the pairings")
			}
			return key, string(m[1])
		}
	}
	t.Fatal("the device has no config dir")
	return e2ee.KeyPair{}, ""
}

// pgDump dumps the test's schema of the relay's database, as an operator
// would.
func pgDump(ctx context.Context, t *testing.T, dbURL string) []byte {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	schema := q.Get("search_path")
	q.Del("search_path")
	u.RawQuery = q.Encode()
	dump, err := exec.CommandContext(ctx, "pg_dump", "--data-only", "--schema", schema, "--dbname", u.String()).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("pg_dump: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("pg_dump: %v", err)
	}
	return dump
}

// TestSealedOfflineBuffer: a paired device queues messages for its
// machine while the machine is offline (betcode send, and envelopes the
// test seals itself); the relay's database then holds no trace of their
// text; when the machine comes back each message reaches the session once:
// a second copy of an envelope the relay buffered (under another outer key,
// as a relay re-delivering a stored row would send it) and the same
// envelope delivered again later are refused as replayed.
func TestSealedOfflineBuffer(t *testing.T) {
	dbURL := pgtest.URL(t)
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), dbURL: dbURL})
	a := w.startE2EAgent("offl")
	ca := filepath.Join(w.pki, pki.CACertFile)
	ctx := ctxT(t, 4*time.Minute)

	phone := newDevice(t, w)
	code, pairCmd, pairOut := pairCode(ctx, t, a)
	if out, err := phone.run(ctx, t, "", "pair", code, "--relay-ca", ca, "--name", "phone"); err != nil {
		t.Fatalf("betcode pair: %v\n%s", err, out)
	}
	if err := pairCmd.Wait(); err != nil {
		t.Fatalf("betcode-agent pair: %v\n%s", err, pairOut.String())
	}
	if out, err := phone.run(ctx, t, "", "chat", "--cwd", a.project, "first"); err != nil {
		t.Fatalf("betcode chat: %v\n%s", err, out)
	}
	out, err := phone.run(ctx, t, "", "sessions")
	m := regexp.MustCompile(`(?m)^([0-9a-f-]{36})\s`).FindAllStringSubmatch(out, -1)
	if err != nil || len(m) != 1 {
		t.Fatalf("betcode sessions: %v\n%s", err, out)
	}
	session := m[0][1]

	a.proc.kill()
	w.relay.waitLine(t, `machine offline`, 30*time.Second)

	// betcode send seals the message when the channel will not open.
	viaCLI := marker("SEALED-CLI")
	out, err = phone.run(ctx, t, "", "send", "--session", session, viaCLI)
	if err != nil || !strings.Contains(out, "machine offline: message sealed and queued on the relay; it will be delivered when the machine reconnects") {
		t.Fatalf("betcode send to an offline machine: %v\n%s", err, out)
	}
	// An envelope sealed here, buffered twice under two outer keys.
	devKey, token := deviceSecrets(t, phone)
	viaTest := marker("SEALED-TEST")
	id, _ := e2ee.NewSealedID()
	env, err := e2ee.SealMessage(devKey, "offl", pairedMachineKey(t, phone), e2ee.Sealed{V: 1, ID: id, At: time.Now().UnixMilli(),
		Kind: e2ee.SealedQueue, SessionID: session, Text: viaTest})
	if err != nil {
		t.Fatal(err)
	}
	channels := pb.NewChannelServiceClient(w.dial(w.addr, token))
	for _, outer := range []string{"outer-1", "outer-2", "outer-1"} {
		resp, err := channels.Deliver(onMachine(ctx, "offl"), &pb.DeliverRequest{Sealed: env, IdempotencyKey: outer})
		if err != nil || !resp.Buffered {
			t.Fatalf("Deliver to the offline machine: %v, %v", resp, err)
		}
	}

	dump := pgDump(ctx, t, dbURL)
	if !bytes.Contains(dump, []byte("Deliver")) {
		t.Fatalf("the dump holds no buffered Deliver: is it the relay's database?")
	}
	for _, mk := range []string{viaCLI, viaTest, session} {
		if bytes.Contains(dump, []byte(mk)) {
			t.Errorf("the relay's database holds %q", mk)
		}
	}

	a.restart(w)
	if err := w.api.WaitPrompts(ctx, viaCLI, viaTest); err != nil {
		t.Fatalf("the sealed messages never reached the model: %v (prompts %q)", err, promptLines(w.api.Requests()))
	}
	// The relay delivered the second copy too, and the machine refused it.
	w.relay.waitLine(t, `buffered request refused by the machine`, 30*time.Second)
	if !strings.Contains(a.proc.Log(), "sealed envelope replayed") {
		t.Errorf("the agent did not log the replayed copy:\n%s", a.proc.Log())
	}
	// Delivered again now, straight to the machine: refused.
	_, err = channels.Deliver(onMachine(ctx, "offl"), &pb.DeliverRequest{Sealed: env, IdempotencyKey: "outer-3"})
	if status.Code(err) != codes.AlreadyExists || !strings.Contains(errDetails(err), "SEALED_REPLAYED") {
		t.Fatalf("the same envelope again: %v %s; want ALREADY_EXISTS / SEALED_REPLAYED", err, errDetails(err))
	}
	// Each message reached the session once.
	if _, err := w.api.Wait(ctx, func(rs []fakeapi.Request) bool {
		return count(promptLines(rs), viaCLI) >= 1 && count(promptLines(rs), viaTest) >= 1
	}); err != nil {
		t.Fatal(err)
	}
	lines := promptLines(w.api.Requests())
	if count(lines, viaCLI) != 1 || count(lines, viaTest) != 1 {
		t.Fatalf("prompts the model saw: %q; want each sealed message once", lines)
	}
}

func count(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}
