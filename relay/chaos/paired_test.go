package chaos

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

// pairedEvery: client i is a paired device when i%pairedEvery ==
// pairedEvery-1 (client 3, 7, 11...): its machines run the shipped default,
// --relay-e2e required, and every call it makes to them (StartSession,
// QueueMessage, ResumeSession, AnswerPermission) goes inside end-to-end
// channels (Noise) through the relay, as the betcode CLI on a paired
// device does; a message for a machine whose channel will not open goes as
// a sealed envelope, which the relay buffers.
const pairedEvery = 4

func isPaired(idx int) bool { return idx%pairedEvery == pairedEvery-1 }

// pairing is what a device keeps of one machine it paired with.
type pairing struct {
	machineID  string
	machineKey []byte // pinned at pairing
	token      string // the relay credential scoped to the machine
}

// device is a paired client's key and its pairings, and a channel
// connection per machine.
type device struct {
	key e2ee.KeyPair

	mu    sync.Mutex
	pairs map[string]pairing
	conns map[string]*grpc.ClientConn
}

func newDevice(t *testing.T) *device {
	t.Helper()
	key, err := e2ee.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return &device{key: key, pairs: map[string]pairing{}, conns: map[string]*grpc.ClientConn{}}
}

// pairRetrying pairs d with a, with a new code for each of up to 5 tries
// (the relay may not route to a machine that has only just connected).
func (w *world) pairRetrying(ctx context.Context, d *device, a *agentProc, name string) error {
	var err error
	for try := range 5 {
		if err = w.pair(ctx, d, a, name); err == nil {
			return nil
		}
		w.t.Logf("pair with %s (try %d): %v", a.id, try+1, err)
		if !sleepCtx(ctx, time.Duration(try+1)*200*time.Millisecond) {
			break
		}
	}
	return fmt.Errorf("pair a device with %s: %w", a.id, err)
}

var pairCodeRE = regexp.MustCompile(`^\s*betcode pair (\S+)$`)

// pair pairs d with machine a as a user would: `betcode-agent pair` on the
// machine prints the code, and the device answers it through the relay
// (ChannelService.Pair with the code's ticket); then it opens a gRPC
// connection whose every transport is a channel to the machine.
func (w *world) pair(ctx context.Context, d *device, a *agentProc, name string) error {
	cmd := exec.CommandContext(ctx, w.bins.agent, "pair", "--agent", "unix://"+a.sock, "--no-qr")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("betcode-agent pair on %s: %w", a.id, err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	var text string
	for sc.Scan() {
		if m := pairCodeRE.FindStringSubmatch(sc.Text()); m != nil {
			text = m[1]
			break
		}
	}
	go func() {
		for sc.Scan() { // the rest of its output, until it exits
		}
	}()
	if text == "" {
		return fmt.Errorf("betcode-agent pair on %s printed no code", a.id)
	}
	code, err := e2ee.ParsePairingCode(text)
	if err != nil {
		return fmt.Errorf("the pairing code of %s: %w", a.id, err)
	}
	cc, err := w.dial(w.cliLink.Listen, code.Ticket)
	if err != nil {
		return err
	}
	defer cc.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewChannelServiceClient(cc).Pair(onMachine(sctx, a.id))
	if err != nil {
		return fmt.Errorf("pair with %s: %w", a.id, err)
	}
	t := &streamTransport{cancel: cancel, send: func(b []byte) error { return stream.Send(&pb.PairRequest{Data: b}) },
		recv: func() ([]byte, error) { m, err := stream.Recv(); return m.GetData(), err }}
	hello, _ := json.Marshal(map[string]string{"name": name})
	c, err := e2ee.PairDevice(ctx, t, d.key, code, hello)
	if err != nil {
		return err
	}
	defer c.Close()
	raw, err := c.ReadMessage()
	if err != nil {
		return fmt.Errorf("pair with %s: the machine's answer: %w", a.id, err)
	}
	var welcome struct {
		MachineID string `json:"machine_id"`
		Token     string `json:"token"`
		Error     string `json:"error"`
	}
	if err := json.Unmarshal(raw, &welcome); err != nil || welcome.Error != "" || welcome.MachineID != a.id || welcome.Token == "" {
		return fmt.Errorf("pair with %s: the machine answered %q (%v)", a.id, raw, err)
	}
	if err := c.WriteMessage([]byte("stored")); err != nil {
		return fmt.Errorf("pair with %s: %w", a.id, err)
	}
	p := pairing{machineID: a.id, machineKey: c.PeerStatic(), token: welcome.Token}
	conn, err := grpc.NewClient("passthrough:///"+a.id,
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return w.dialChannel(ctx, d, p) }),
		// The channel is the security (Noise inside the relay's TLS).
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// agent/client.ConnectParams, which the betcode CLI runs with.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 10 * time.Second}))
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.pairs[a.id], d.conns[a.id] = p, conn
	d.mu.Unlock()
	return nil
}

// conn is the channel connection to machine id.
func (d *device) conn(id string) *grpc.ClientConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conns[id]
}

func (d *device) pairingOf(id string) pairing {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pairs[id]
}

func (d *device) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.Close()
	}
}

// dialChannel opens one channel to p's machine through the clients' link:
// a relay connection with the device's scoped token, ChannelService.Open,
// and the Noise handshake against the pinned key; as
// agent/client.DialChannel, it tries again after what the relay asks
// (its machine moving between replicas) while ctx lasts.
func (w *world) dialChannel(ctx context.Context, d *device, p pairing) (net.Conn, error) {
	for {
		c, err := w.dialChannelOnce(ctx, d, p)
		if err == nil {
			return c, nil
		}
		wait, ok := retryAfter(err)
		if !ok || !sleepCtx(ctx, wait) {
			return nil, err
		}
	}
}

func (w *world) dialChannelOnce(ctx context.Context, d *device, p pairing) (net.Conn, error) {
	cc, err := w.dial(w.cliLink.Listen, p.token)
	if err != nil {
		return nil, err
	}
	// The stream lives as long as the channel, not as the dial's ctx.
	sctx, cancel := context.WithCancel(context.Background())
	stream, err := pb.NewChannelServiceClient(cc).Open(onMachine(sctx, p.machineID))
	if err != nil {
		cancel()
		cc.Close()
		return nil, fmt.Errorf("open a channel: %w", err)
	}
	t := &streamTransport{cancel: cancel, cc: cc, send: func(b []byte) error { return stream.Send(&pb.OpenRequest{Data: b}) },
		recv: func() ([]byte, error) { m, err := stream.Recv(); return m.GetData(), err }}
	c, err := e2ee.Dial(ctx, t, d.key, p.machineID, p.machineKey, []byte(`{"name":"chaos device"}`))
	if err != nil {
		t.Close()
		return nil, err
	}
	return c, nil
}

// streamTransport carries Noise messages on a ChannelService stream; Close
// ends the stream and the relay connection it came on.
type streamTransport struct {
	send   func([]byte) error
	recv   func() ([]byte, error)
	cancel context.CancelFunc
	cc     *grpc.ClientConn
	once   sync.Once
}

func (t *streamTransport) Send(b []byte) error   { return t.send(b) }
func (t *streamTransport) Recv() ([]byte, error) { return t.recv() }
func (t *streamTransport) Close() error {
	t.once.Do(func() {
		t.cancel()
		if t.cc != nil {
			t.cc.Close()
		}
	})
	return nil
}

// sealedKey is the idempotency key of a paired client's message: 32 hex
// digits, so that the sealed envelope's id is the same key
// (agent/client.SealedID) and a message sent both ways is taken once.
func sealedKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

// queueSealed sends a message as `betcode send` does to a paired machine
// whose channel would not open: sealed to the machine's key, through
// ChannelService.Deliver, which the relay buffers while the machine is
// offline. taken is false when the envelope was taken before (a retry).
func (w *world) queueSealed(ctx context.Context, d *device, machineID, session, key, text string) (buffered, dup bool, err error) {
	p := d.pairingOf(machineID)
	sealed, err := e2ee.SealMessage(d.key, machineID, p.machineKey, e2ee.Sealed{V: 1, ID: key, At: time.Now().UnixMilli(),
		Kind: e2ee.SealedQueue, SessionID: session, Text: text})
	if err != nil {
		return false, false, err
	}
	outer, err := e2ee.NewSealedID()
	if err != nil {
		return false, false, err
	}
	cc, err := w.dial(w.cliLink.Listen, p.token)
	if err != nil {
		return false, false, err
	}
	defer cc.Close()
	resp, err := pb.NewChannelServiceClient(cc).Deliver(onMachine(ctx, machineID), &pb.DeliverRequest{Sealed: sealed, IdempotencyKey: outer})
	if status.Code(err) == codes.AlreadyExists {
		return false, true, nil
	}
	if err != nil {
		return false, false, err
	}
	return resp.Buffered, false, nil
}

// probeChannel opens a channel to another user's machine with one of d's
// scoped tokens and sends a handshake's worth of bytes: the relay must
// refuse it (NOT_FOUND). Any other answer but a fault's (UNAVAILABLE, a
// deadline) came from the machine, which the relay should never have
// reached: that is the error returned.
func (w *world) probeChannel(ctx context.Context, d *device, other *agentProc) error {
	d.mu.Lock()
	var p pairing
	for _, x := range d.pairs {
		p = x
		break
	}
	d.mu.Unlock()
	if p.token == "" {
		return nil
	}
	cc, err := w.dial(w.cliLink.Listen, p.token)
	if err != nil {
		return nil
	}
	defer cc.Close()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stream, err := pb.NewChannelServiceClient(cc).Open(onMachine(sctx, other.id))
	if err != nil {
		return nil
	}
	junk := make([]byte, 96)
	rand.Read(junk)
	_ = stream.Send(&pb.OpenRequest{Data: junk})
	_, err = stream.Recv()
	switch status.Code(err) {
	case codes.NotFound, codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.ResourceExhausted:
		return nil
	}
	return fmt.Errorf("a channel to %s (owned by %s) with a token scoped to %s reached the machine: %v", other.id, other.owner, p.machineID, err)
}

// runBrowser follows the session as a paired phone's web app does: its
// event socket inside an end-to-end channel carried by the relay's
// /api/channel WebSocket (docs/e2ee-wire.md §1-2), on the app's schedule.
func (f *follower) runBrowser(ctx context.Context) {
	f.follow(ctx, f.browserSession, 100*time.Millisecond, 5*time.Second)
}

// browserSession runs one channel of a paired browser until it fails: the
// WebSocket to /api/channel, the Noise handshake (hello protocol web/1),
// and the event socket inside it (ws.open with the subscription).
func (f *follower) browserSession(ctx context.Context, streaming func()) error {
	d, c := f.c.dev, f.c
	p := d.pairingOf(f.machine.id)
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(dctx, c.channelURL, &websocket.DialOptions{HTTPClient: c.channelHTTP})
	if err != nil {
		return fmt.Errorf("channel websocket: %w", err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(70_000) // one Noise message (shared/webapi.MaxCarrierMessage)
	if err := wsjson.Write(dctx, ws, map[string]string{"type": "hello", "token": p.token, "machine": p.machineID}); err != nil {
		return fmt.Errorf("channel websocket hello: %w", err)
	}
	conn, err := e2ee.Dial(dctx, socketTransport{ws}, d.key, p.machineID, p.machineKey, []byte(`{"name":"chaos browser","protocol":"web/1"}`))
	if err != nil {
		return fmt.Errorf("browser channel: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	f.mu.Lock()
	from := f.last
	f.mu.Unlock()
	cs := &channelSocket{c: conn, r: bufio.NewReader(conn)}
	if err := cs.frame(map[string]any{"t": "ws.open", "subscriptions": []map[string]any{{"sessionId": f.session, "afterSequence": from}}}); err != nil {
		return fmt.Errorf("browser channel: ws.open: %w", err)
	}
	return f.webEvents(ctx, cs, streaming)
}

// socketTransport carries Noise messages as binary WebSocket messages.
type socketTransport struct{ c *websocket.Conn }

func (t socketTransport) Send(b []byte) error {
	return t.c.Write(context.Background(), websocket.MessageBinary, b)
}

func (t socketTransport) Recv() ([]byte, error) {
	typ, b, err := t.c.Read(context.Background())
	if err != nil {
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("channel websocket closed %d: %s", ce.Code, ce.Reason)
		}
		return nil, err
	}
	if typ != websocket.MessageBinary {
		return nil, errors.New("channel websocket: a text message after the hello")
	}
	return b, nil
}

func (t socketTransport) Close() error { return t.c.CloseNow() }

// channelSocket is the event socket inside a web/1 channel: frames of a
// 4-byte length and a JSON object.
type channelSocket struct {
	c  net.Conn
	r  *bufio.Reader
	mu sync.Mutex
}

func (s *channelSocket) frame(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err = s.c.Write(append(buf, b...))
	return err
}

func (s *channelSocket) read(context.Context) (wsMsg, error) {
	for {
		var n [4]byte
		if _, err := io.ReadFull(s.r, n[:]); err != nil {
			return wsMsg{}, fmt.Errorf("browser channel: %w", err)
		}
		b := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(s.r, b); err != nil {
			return wsMsg{}, fmt.Errorf("browser channel: %w", err)
		}
		var fr struct {
			T      string `json:"t"`
			Data   string `json:"data"`
			Code   int    `json:"code"`
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal(b, &fr); err != nil {
			return wsMsg{}, fmt.Errorf("browser channel: a malformed frame: %w", err)
		}
		switch fr.T {
		case "ws":
			var m wsMsg
			if err := json.Unmarshal([]byte(fr.Data), &m); err != nil {
				return wsMsg{}, fmt.Errorf("browser channel: a malformed event: %w", err)
			}
			return m, nil
		case "ws.close":
			return wsMsg{}, fmt.Errorf("browser channel: the event socket closed %d: %s", fr.Code, fr.Reason)
		}
	}
}

func (s *channelSocket) write(_ context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.frame(map[string]string{"t": "ws", "data": string(b)})
}
