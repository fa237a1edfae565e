package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/relay/pki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
	"github.com/betcode-dev/betcode/shared/fakeapi"
	"github.com/betcode-dev/betcode/shared/promtest"
)

// device is a betcode CLI install: its own config directory (device key,
// pairings), no relay login.
type device struct {
	w   *world
	env []string
}

func newDevice(t *testing.T, w *world) *device {
	return &device{w: w, env: append(cleanEnv(), "XDG_CONFIG_HOME="+t.TempDir())}
}

// run runs betcode with args in dir and returns its combined output.
func (d *device) run(ctx context.Context, t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin(t, "betcode"), args...)
	cmd.Env, cmd.Dir = d.env, dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// pairCode starts betcode-agent pair on machine a and returns its code and
// the running command (which exits once a device paired).
func pairCode(ctx context.Context, t *testing.T, a *agent) (string, *exec.Cmd, *lockedBuffer) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin(t, "betcode-agent"), "pair", "--agent", "unix://"+a.sock, "--no-qr")
	cmd.Env = cleanEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errBuf := &lockedBuffer{}
	cmd.Stderr = errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	rest := &lockedBuffer{}
	sc := bufio.NewScanner(stdout)
	var code string
	for sc.Scan() {
		rest.Write([]byte(sc.Text() + "\n"))
		if m := regexp.MustCompile(`^\s*betcode pair (\S+)$`).FindStringSubmatch(sc.Text()); m != nil {
			code = m[1]
			break
		}
	}
	if code == "" {
		t.Fatalf("betcode-agent pair printed no code:\n%s%s", rest.String(), errBuf.String())
	}
	go func() {
		for sc.Scan() {
			rest.Write([]byte(sc.Text() + "\n"))
		}
	}()
	return code, cmd, rest
}

// marker returns a unique string to look for where it must not be.
func marker(kind string) string {
	var b [8]byte
	rand.Read(b[:])
	return "MARKER-" + kind + "-" + hex.EncodeToString(b[:])
}

// TestEndToEndEncryption pairs a CLI device with a machine whose agent
// serves relayed calls only inside channels, runs a conversation with a
// tool call through the relay, then checks from the relay's side that it
// could neither read nor act: none of the conversation's markers is in its
// database, logs, metrics or memory; every service the relay (or anyone
// holding its keys and database) calls outside a channel is refused; an
// unpaired key is refused; a revoked device is cut within a second.
func TestEndToEndEncryption(t *testing.T) {
	dbURL := pgtest.URL(t)
	w := newWorldOf(t, &world{t: t, pki: t.TempDir(), dataDir: t.TempDir(), dbURL: dbURL,
		extraArgs: []string{"--metrics-listen", "127.0.0.1:0"}})
	a := w.startE2EAgent("sealed")
	ca := filepath.Join(w.pki, pki.CACertFile)
	ctx := ctxT(t, 3*time.Minute)

	// Pairing: the code from the machine, pasted on the device.
	phone := newDevice(t, w)
	code, pairCmd, pairOut := pairCode(ctx, t, a)
	out, err := phone.run(ctx, t, "", "pair", code, "--relay-ca", ca, "--name", "test phone")
	if err != nil || !strings.Contains(out, "paired with name-sealed (sealed)") {
		t.Fatalf("betcode pair: %v\n%s", err, out)
	}
	if err := pairCmd.Wait(); err != nil || !strings.Contains(pairOut.String(), "paired: test phone") {
		t.Fatalf("betcode-agent pair: %v\n%s", err, pairOut.String())
	}
	t.Run("a code works once", func(t *testing.T) {
		other := newDevice(t, w)
		out, err := other.run(ctx, t, "", "pair", code, "--relay-ca", ca)
		if err == nil || !strings.Contains(out, "already used") {
			t.Fatalf("second use of a pairing code: %v\n%s", err, out)
		}
	})

	// A conversation end to end, with markers in the prompt, the reply, a
	// file's content and the tool's output.
	prompt, reply, fileMark := marker("PROMPT"), marker("REPLY"), marker("FILE")
	if err := os.WriteFile(filepath.Join(a.project, "secret.txt"), []byte(fileMark+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.api.Enqueue(fakeapi.Reply{Text: reply, ToolUse: &fakeapi.ToolUse{Name: "Bash",
		Input: map[string]any{"command": "cat secret.txt", "description": "Read the secret"}}})
	out, err = phone.run(ctx, t, "", "chat", "--cwd", a.project, "--allow", "Bash", prompt)
	if err != nil || !strings.Contains(out, reply) || !strings.Contains(out, fileMark) {
		t.Fatalf("betcode chat end to end: %v\n%s", err, out)
	}
	if err := w.api.WaitPrompts(ctx, prompt); err != nil {
		t.Fatalf("the model never saw the prompt: %v", err)
	}

	t.Run("the relay refuses to act", func(t *testing.T) {
		// The relay's operator can mint any user token: alice owns the
		// machine, so the relay routes her calls; the agent refuses them.
		cc := w.client()
		for _, m := range agentMethods(t) {
			err := invokeAny(onMachine(ctxT(t, 10*time.Second), "sealed"), cc, m)
			switch m.FullName() {
			case "betcode.v1.ChannelService.Open", "betcode.v1.ChannelService.Pair":
				continue
			case "betcode.v1.ChannelService.Deliver":
				// Served to the relay by design: the machine acts only on
				// an envelope a paired device sealed (sealed_test.go).
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(errDetails(err), "SEALED_INVALID") {
					t.Errorf("an empty Deliver through the relay: %v, want INVALID_ARGUMENT (SEALED_INVALID)", err)
				}
				continue
			}
			if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), "end-to-end") &&
				!strings.Contains(status.Convert(err).Message(), "never through the relay") {
				t.Errorf("%s through the relay outside a channel: %v, want PERMISSION_DENIED (E2E_REQUIRED)", m.FullName(), err)
			}
		}
	})
	t.Run("an unpaired key is refused", func(t *testing.T) {
		stranger, err := e2ee.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		machineKey := pairedMachineKey(t, phone)
		stream, err := pb.NewChannelServiceClient(w.client()).Open(onMachine(ctx, "sealed"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = e2ee.Dial(ctx, openTransport{stream}, stranger, "sealed", machineKey, []byte(`{"name":"mallory"}`))
		var refused *e2ee.RefusedError
		if !errors.As(err, &refused) || !strings.Contains(refused.Reason, "not paired") {
			t.Fatalf("an unpaired device's channel: %v", err)
		}
	})
	t.Run("a substituted machine key fails", func(t *testing.T) {
		// The relay answers the channel with its own key: the device, which
		// pinned the machine's key at pairing, cannot complete the handshake.
		fake, _ := e2ee.GenerateKey()
		stream, err := pb.NewChannelServiceClient(w.client()).Open(onMachine(ctx, "sealed"))
		if err != nil {
			t.Fatal(err)
		}
		dev, _ := e2ee.GenerateKey()
		_, err = e2ee.Dial(ctx, openTransport{stream}, dev, "sealed", fake.Public, nil)
		if err == nil {
			t.Fatal("a handshake to a substituted machine key succeeded")
		}
	})

	t.Run("nothing readable at the relay", func(t *testing.T) {
		markers := []string{prompt, reply, fileMark}
		// The test's schema (pgtest gives each test its own, as the URL's
		// search_path), dumped as an operator would dump the database.
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
		if !bytes.Contains(dump, []byte("sealed")) {
			t.Fatalf("the dump holds no row about the machine: is it the relay's database?")
		}
		m := regexp.MustCompile(`relay metrics.* addr=(\S+)`).FindStringSubmatch(w.relay.Log())
		if m == nil {
			t.Fatalf("the relay logged no metrics address")
		}
		metrics := promtest.Scrape(t, "http://"+m[1]+"/metrics")
		places := map[string][]byte{"pg_dump": dump, "relay log": []byte(w.relay.Log()), "relay metrics": []byte(metrics)}
		filepath.Walk(w.dataDir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				b, _ := os.ReadFile(p)
				places["relay data dir "+p] = b
			}
			return nil
		})
		for where, b := range places {
			for _, mk := range markers {
				if bytes.Contains(b, []byte(mk)) {
					t.Errorf("%s holds %s", where, mk)
				}
			}
		}
		// The control: what the relay surely holds (its command line's
		// data directory, in os.Args) is found by the same scan.
		if found, _ := scanMemory(t, w.relay.cmd.Process.Pid, []string{w.dataDir}); len(found) != 1 {
			t.Fatal("the memory scan does not find the relay's own --data-dir: the scan is broken")
		}
		found, scanned := scanMemory(t, w.relay.cmd.Process.Pid, markers)
		for _, mk := range found {
			t.Errorf("the relay's memory holds %s", mk)
		}
		t.Logf("scanned %d MiB of the relay's memory", scanned>>20)
	})

	t.Run("a revoked device is cut within a second", func(t *testing.T) {
		port := freePort(t)
		fwd := exec.CommandContext(ctx, bin(t, "betcode"), "forward", "--machine", "sealed", "--listen", port)
		fwd.Env = phone.env
		fwdOut := &lockedBuffer{}
		fwd.Stdout, fwd.Stderr = fwdOut, fwdOut
		if err := fwd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fwd.Process.Kill(); fwd.Wait() })
		// A standard gRPC client on the forwarded port, as grpcurl would be.
		cc, err := grpc.NewClient("passthrough:///"+port, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		var resp *pb.ListDevicesResponse
		for {
			resp, err = pb.NewDeviceServiceClient(cc).ListDevices(ctx, &pb.ListDevicesRequest{}, grpc.WaitForReady(true))
			if err == nil || ctx.Err() != nil {
				break
			}
		}
		if err != nil || len(resp.Devices) != 1 || resp.Devices[0].Name != "test phone" || resp.Devices[0].LastSeen == nil {
			t.Fatalf("ListDevices through betcode forward: %v %v\n%s", resp, err, fwdOut.String())
		}
		watch, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := watch.Recv(); err != nil {
			t.Fatal(err)
		}
		ended := make(chan time.Time, 1)
		go func() {
			for {
				if _, err := watch.Recv(); err != nil {
					ended <- time.Now()
					return
				}
			}
		}()
		rev := exec.CommandContext(ctx, bin(t, "betcode-agent"), "devices", "revoke", resp.Devices[0].Id, "--agent", "unix://"+a.sock)
		rev.Env = cleanEnv()
		revoked := time.Now()
		if out, err := rev.CombinedOutput(); err != nil || !strings.Contains(string(out), "1 open channel(s) ended") {
			t.Fatalf("betcode-agent devices revoke: %v\n%s", err, out)
		}
		select {
		case at := <-ended:
			if d := at.Sub(revoked); d > time.Second {
				t.Errorf("the revoked device's stream ended %s after the revocation, want <= 1s", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the revoked device's stream is still open 5 s after the revocation")
		}
		out, err := phone.run(ctx, t, "", "sessions")
		if err == nil || !strings.Contains(out, "revoked") {
			t.Fatalf("a revoked device's new call: %v\n%s", err, out)
		}
	})
}

// agentMethods lists every method of every betcode.v1 service the agent
// serves (the relay's own services excluded), plus reflection.
func agentMethods(t *testing.T) []protoreflect.MethodDescriptor {
	relayOwn := map[string]bool{"MachineService": true, "AdminService": true, "EnrollService": true, "OIDCService": true, "TunnelService": true,
		"BetCodeHealth": true}
	var out []protoreflect.MethodDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("betcode.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			s := fd.Services().Get(i)
			if relayOwn[string(s.Name())] {
				continue
			}
			for j := range s.Methods().Len() {
				out = append(out, s.Methods().Get(j))
			}
		}
		return true
	})
	if len(out) < 40 {
		t.Fatalf("found only %d agent methods", len(out))
	}
	return out
}

// invokeAny calls method m with an empty request and returns the call's
// error (for a stream: the first Recv's).
func invokeAny(ctx context.Context, cc *grpc.ClientConn, m protoreflect.MethodDescriptor) error {
	name := "/" + string(m.Parent().FullName()) + "/" + string(m.Name())
	req, resp := dynamicpb.NewMessage(m.Input()), dynamicpb.NewMessage(m.Output())
	if !m.IsStreamingClient() && !m.IsStreamingServer() {
		return cc.Invoke(ctx, name, req, resp)
	}
	s, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: m.IsStreamingClient(), ServerStreams: m.IsStreamingServer()}, name)
	if err != nil {
		return err
	}
	if err := s.SendMsg(req); err != nil && err != io.EOF {
		return err
	}
	s.CloseSend()
	return s.RecvMsg(resp)
}

// openTransport carries Noise messages on a ChannelService.Open stream.
type openTransport struct {
	s grpc.BidiStreamingClient[pb.OpenRequest, pb.OpenResponse]
}

func (o openTransport) Send(b []byte) error { return o.s.Send(&pb.OpenRequest{Data: b}) }
func (o openTransport) Recv() ([]byte, error) {
	m, err := o.s.Recv()
	if err != nil {
		return nil, err
	}
	return m.Data, nil
}
func (o openTransport) Close() error { return o.s.CloseSend() }

// pairedMachineKey reads the machine key the device pinned.
func pairedMachineKey(t *testing.T, d *device) []byte {
	t.Helper()
	for _, kv := range d.env {
		if dir, ok := strings.CutPrefix(kv, "XDG_CONFIG_HOME="); ok {
			b, err := os.ReadFile(filepath.Join(dir, "betcode", "pairings.json"))
			if err != nil {
				t.Fatal(err)
			}
			m := regexp.MustCompile(`"machine_key": "([^"]+)"`).FindSubmatch(b)
			if m == nil {
				t.Fatalf("no machine key in the pairings:\n%s", b)
			}
			key, err := base64.StdEncoding.DecodeString(string(m[1]))
			if err != nil {
				t.Fatal(err)
			}
			return key
		}
	}
	t.Fatal("the device has no config dir")
	return nil
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scanMemory reads the writable mappings of process pid (/proc/PID/mem, as
// root or the same user) and reports which of markers it holds. Mappings
// larger than 1 GiB (the race detector's shadow) are skipped.
func scanMemory(t *testing.T, pid int, markers []string) (found []string, scanned int64) {
	t.Helper()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatalf("read the relay's memory map: %v", err)
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatalf("open the relay's memory (needs root or ptrace rights): %v", err)
	}
	defer mem.Close()
	seen := map[string]bool{}
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[1], "rw") {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end-start > 1<<30 {
			continue
		}
		buf := make([]byte, end-start)
		n, _ := mem.ReadAt(buf, int64(start))
		scanned += int64(n)
		for _, mk := range markers {
			if !seen[mk] && bytes.Contains(buf[:n], []byte(mk)) {
				seen[mk] = true
				found = append(found, mk)
			}
		}
	}
	if scanned < 1<<20 {
		t.Fatalf("read only %d bytes of the relay's memory", scanned)
	}
	return found, scanned
}
