package e2ee

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWebPeer runs the browser's e2ee code (web/src/e2ee, built from
// web/test/e2ee-peer.ts) under node as the peer of this package: Accept
// against its Noise_IK dial and web/1 frames, PairMachine against its
// pairing, and its sealed envelopes opened here. Without node (or web's
// node_modules) it skips, unless CI=true, where it fails saying what to
// install.
func TestWebPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	peer := buildWebPeer(t)
	machine := newKey(t)

	t.Run("channel", func(t *testing.T) {
		var mu sync.Mutex
		var devicePub, hello []byte
		authorize := func(pub, h []byte) error {
			mu.Lock()
			defer mu.Unlock()
			devicePub, hello = pub, h
			return nil
		}
		p := startWebPeer(t, peer, map[string]any{"mode": "dial", "machineId": testMachineID,
			"machineKey": machine.Public, "name": "Peer Phone"})
		c, err := Accept(testCtx(t), p, machine, testMachineID, authorize)
		if err != nil {
			t.Fatalf("accept the web peer: %v (its stderr: %s)", err, p.stderr())
		}
		seen := serveWeb1(t, c)
		res := p.result(t)
		if res["ok"] != true {
			t.Fatalf("web peer: %v", res)
		}
		mu.Lock()
		defer mu.Unlock()
		if got := base64.StdEncoding.EncodeToString(devicePub); got != res["publicKey"] {
			t.Errorf("the device key Accept authenticated is %s, the peer's %v", got, res["publicKey"])
		}
		if res["webcrypto"] != true {
			t.Errorf("the peer did not use a WebCrypto key: %v", res["webcrypto"])
		}
		if string(hello) != `{"name":"Peer Phone","version":"web test","protocol":"web/1"}` {
			t.Errorf("hello %s", hello)
		}
		want := map[string]any{
			"slow":    "AbortError",
			"r1":      map[string]any{"status": 200.0, "body": `{"body":"","method":"GET","path":"/echo?x=1"}`},
			"r2":      map[string]any{"status": 200.0, "body": true},
			"wsClose": 1000.0,
			"events":  []any{`{"type":"hello"}`, `{"type":"ready","subscriptions":[{"sessionId":"s-1","afterSequence":3}]}`, `{"type":"pong"}`},
			"events2": []any{`{"type":"hello"}`, `{"type":"ready","subscriptions":null}`},
			"count":   map[string]any{"status": 200.0, "body": `{"cancelled":[1],"requests":4}`},
		}
		for k, w := range want {
			if g, _ := json.Marshal(res[k]); string(g) != mustJSON(w) {
				t.Errorf("%s: %s, want %s", k, g, mustJSON(w))
			}
		}
		if got := seen(); got != "ws.open ws ws.close ws.open" {
			t.Errorf("event frames the machine saw: %s", got)
		}
	})

	t.Run("refused", func(t *testing.T) {
		p := startWebPeer(t, peer, map[string]any{"mode": "dial", "machineId": testMachineID, "machineKey": machine.Public})
		_, err := Accept(testCtx(t), p, machine, testMachineID, func([]byte, []byte) error { return errors.New("revoked: pair again") })
		if !errors.Is(err, ErrRefused) {
			t.Fatalf("accept: %v", err)
		}
		res := p.result(t)
		if res["ok"] != false || res["code"] != "REFUSED" || !strings.HasSuffix(res["error"].(string), "revoked: pair again") {
			t.Fatalf("web peer: %v", res)
		}
	})

	t.Run("pair", func(t *testing.T) {
		code, offers := newOffer(t, machine)
		p := startWebPeer(t, peer, map[string]any{"mode": "pair", "code": code.String(), "name": "Peer Phone"})
		c, hello, err := PairMachine(testCtx(t), p, machine, code.MachineID, offers.lookup)
		if err != nil {
			t.Fatalf("pair machine: %v (its stderr: %s)", err, p.stderr())
		}
		if string(hello) != `{"name":"Peer Phone"}` {
			t.Errorf("hello %s", hello)
		}
		welcome := `{"machine_id":"` + code.MachineID + `","machine_name":"box","device_id":"d-1","token":"bct_x"}`
		if err := c.WriteMessage([]byte(welcome)); err != nil {
			t.Fatal(err)
		}
		stored, err := c.ReadMessage()
		if err != nil || string(stored) != "stored" {
			t.Fatalf("the device's answer: %q, %v", stored, err)
		}
		c.Close()
		res := p.result(t)
		pairing, _ := res["pairing"].(map[string]any)
		if res["ok"] != true || pairing == nil {
			t.Fatalf("web peer: %v", res)
		}
		for k, w := range map[string]string{"machineId": code.MachineID, "machineName": "box", "deviceId": "d-1", "token": "bct_x",
			"relay": code.Relay, "fingerprint": Fingerprint(machine.Public), "machineKey": base64.StdEncoding.EncodeToString(machine.Public)} {
			if pairing[k] != w {
				t.Errorf("pairing %s: %v, want %s", k, pairing[k], w)
			}
		}
		if base64.StdEncoding.EncodeToString(c.PeerStatic()) != res["publicKey"] {
			t.Errorf("the device key PairMachine authenticated is not the peer's")
		}
	})

	t.Run("pair with a substituted machine key", func(t *testing.T) {
		code, offers := newOffer(t, machine)
		code.Fingerprint = Fingerprint(newKey(t).Public) // the code names another key
		p := startWebPeer(t, peer, map[string]any{"mode": "pair", "code": code.String()})
		_, _, err := PairMachine(testCtx(t), p, machine, code.MachineID, offers.lookup)
		if !errors.Is(err, ErrPairingFailed) || !strings.Contains(err.Error(), "ended the exchange after seeing this machine's key") {
			t.Fatalf("pair machine: %v", err)
		}
		if res := p.result(t); res["code"] != "KEY_MISMATCH" {
			t.Fatalf("web peer: %v", res)
		}
	})

	t.Run("seal", func(t *testing.T) {
		device := newKey(t)
		p := startWebPeer(t, peer, map[string]any{"mode": "seal", "machineId": testMachineID, "machineKey": machine.Public,
			"device": device.Private, "fields": map[string]any{"session_id": "s-1", "text": "hi"}})
		msg, err := p.Recv()
		if err != nil {
			t.Fatalf("the sealed envelope: %v (its stderr: %s)", err, p.stderr())
		}
		res := p.result(t)
		pub, payload, err := OpenSealed(machine, testMachineID, msg)
		if err != nil {
			t.Fatalf("open the web peer's envelope: %v", err)
		}
		if !bytes.Equal(pub, device.Public) {
			t.Errorf("sealed by %x, want %x", pub, device.Public)
		}
		var got any
		if err := json.Unmarshal(payload, &got); err != nil || !reflect.DeepEqual(got, res["payload"]) {
			t.Errorf("payload %s, the peer sealed %v (%v)", payload, res["payload"], err)
		}
		s, err := ParseSealed(payload)
		if err != nil || s.Kind != SealedQueue || s.SessionID != "s-1" || s.Text != "hi" || time.Since(time.UnixMilli(s.At)).Abs() > time.Minute {
			t.Errorf("payload %+v, %v", s, err)
		}
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// serveWeb1 is a machine's web/1 server in miniature, on c until the device
// closes it: /echo answers what it got, /slow never answers, /count the
// cancels and requests seen; the event socket says hello, ready (with the
// subscriptions) and pong to ping, and confirms ws.close. It returns the
// event frames seen, once the device has closed the channel.
func serveWeb1(t *testing.T, c *Conn) func() string {
	t.Helper()
	done := make(chan struct{})
	var seen []string
	go func() {
		defer close(done)
		defer c.Close()
		r := bufio.NewReader(c)
		var cancelled []int
		requests := 0
		send := func(f map[string]any) {
			b, _ := json.Marshal(f)
			if _, err := c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b)))); err != nil {
				return
			}
			_, _ = c.Write(b) // split on purpose: the device reassembles
		}
		for {
			var n uint32
			if err := binary.Read(r, binary.BigEndian, &n); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Errorf("read a frame: %v", err)
				}
				return
			}
			b := make([]byte, n)
			if _, err := io.ReadFull(r, b); err != nil {
				t.Errorf("read a frame: %v", err)
				return
			}
			var f struct {
				T             string          `json:"t"`
				ID            int             `json:"id"`
				Method        string          `json:"method"`
				Path          string          `json:"path"`
				Body          string          `json:"body"`
				Data          string          `json:"data"`
				Subscriptions json.RawMessage `json:"subscriptions"`
			}
			if err := json.Unmarshal(b, &f); err != nil {
				t.Errorf("frame %q: %v", b, err)
				return
			}
			switch f.T {
			case "req":
				requests++
				switch {
				case strings.HasPrefix(f.Path, "/echo"):
					send(map[string]any{"t": "res", "id": f.ID, "status": 200,
						"body": mustJSON(map[string]string{"method": f.Method, "path": f.Path, "body": f.Body})})
				case f.Path == "/count":
					send(map[string]any{"t": "res", "id": f.ID, "status": 200,
						"body": mustJSON(map[string]any{"cancelled": cancelled, "requests": requests})})
				}
			case "cancel":
				cancelled = append(cancelled, f.ID)
			case "ws.open":
				seen = append(seen, f.T)
				subs := f.Subscriptions
				if subs == nil {
					subs = json.RawMessage("null")
				}
				send(map[string]any{"t": "ws", "data": `{"type":"hello"}`})
				send(map[string]any{"t": "ws", "data": `{"type":"ready","subscriptions":` + string(subs) + `}`})
			case "ws":
				seen = append(seen, f.T)
				if f.Data == `{"type":"ping"}` {
					send(map[string]any{"t": "ws", "data": `{"type":"pong"}`})
				}
			case "ws.close":
				seen = append(seen, f.T)
				send(map[string]any{"t": "ws.close", "code": 1000, "reason": ""})
			default:
				t.Errorf("unknown frame %s", b)
			}
		}
	}()
	return func() string {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("the web peer did not close the channel")
		}
		return strings.Join(seen, " ")
	}
}

// buildWebPeer builds web/test/e2ee-peer.ts into web/.cache (where node
// finds web/node_modules, which the build leaves external) and returns the
// script's path; the build goes when t ends.
func buildWebPeer(t *testing.T) string {
	t.Helper()
	skip := func(why string) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	if _, err := exec.LookPath("node"); err != nil {
		skip("node is not installed: install Node.js 20 or later (and run npm ci in web/) to test the browser's e2ee code against this package")
	}
	web, err := filepath.Abs("../../web")
	if err != nil {
		t.Fatal(err)
	}
	vite := filepath.Join(web, "node_modules", ".bin", "vite")
	if _, err := os.Stat(vite); err != nil {
		skip("web/node_modules is missing: run npm ci in web/ to test the browser's e2ee code against this package")
	}
	if err := os.MkdirAll(filepath.Join(web, ".cache"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := os.MkdirTemp(filepath.Join(web, ".cache"), "e2ee-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", vite, "build", "--ssr", "test/e2ee-peer.ts", "--outDir", out, "--emptyOutDir",
		"--logLevel", "warn")
	cmd.Dir = web
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build web/test/e2ee-peer.ts: %v\n%s", err, b)
	}
	return filepath.Join(out, "e2ee-peer.js")
}

// webProc is a running web peer as a Transport: each message on its stdin
// and stdout is a 4-byte big-endian length and its bytes.
type webProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	errBuf *lockedBuffer
	exited chan struct{}
	mu     sync.Mutex
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startWebPeer(t *testing.T, script string, job map[string]any) *webProc {
	t.Helper()
	for k, v := range job {
		if b, ok := v.([]byte); ok {
			job[k] = base64.StdEncoding.EncodeToString(b)
		}
	}
	cmd := exec.Command("node", script, mustJSON(job))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &webProc{cmd: cmd, stdin: stdin, stdout: bufio.NewReader(stdout), errBuf: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
			t.Errorf("the web peer did not exit; its stderr: %s", p.errBuf)
		}
	})
	return p
}

func (p *webProc) Send(msg []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := p.stdin.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...))
	return err
}

func (p *webProc) Recv() ([]byte, error) {
	var n uint32
	if err := binary.Read(p.stdout, binary.BigEndian, &n); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, err
		}
		return nil, io.EOF
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(p.stdout, b); err != nil {
		return nil, io.ErrUnexpectedEOF
	}
	return b, nil
}

func (p *webProc) Close() error { return p.stdin.Close() }

func (p *webProc) stderr() string { return p.errBuf.String() }

// result waits for the peer to exit and returns its RESULT line.
func (p *webProc) result(t *testing.T) map[string]any {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("the web peer did not finish; its stderr: %s", p.stderr())
	}
	for _, line := range strings.Split(p.stderr(), "\n") {
		if j, ok := strings.CutPrefix(line, "RESULT "); ok {
			var res map[string]any
			if err := json.Unmarshal([]byte(j), &res); err != nil {
				t.Fatalf("the web peer's result %q: %v", j, err)
			}
			return res
		}
	}
	t.Fatalf("the web peer gave no result; its stderr: %s", p.stderr())
	return nil
}
