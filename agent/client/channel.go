package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	"github.com/betcode-dev/betcode/agent/pairing"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

// Channel makes Dial reach a paired machine end to end: every connection is
// a Noise channel between this device's key and the machine's pinned key,
// carried by ChannelService.Open through the relay, which sees only
// ciphertext (docs/security.md).
type Channel struct {
	Pairing Pairing
	Device  e2ee.KeyPair
	// Name is this device's name, told to the machine in the handshake.
	Name string
}

// relayCreds returns the TLS credentials for a relay, trusting caFile (or
// the system roots when it is "").
func relayCreds(caFile string) (credentials.TransportCredentials, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("read the relay's CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificates in %s", caFile)
		}
		cfg.RootCAs = pool
	}
	return credentials.NewTLS(cfg), nil
}

// dialRelay connects to a relay with token (scoped or not).
func dialRelay(relay, caFile, token string) (*grpc.ClientConn, error) {
	creds, err := relayCreds(caFile)
	if err != nil {
		return nil, err
	}
	return grpc.NewClient(relay, grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(bearer{token: token, secure: true}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.WithConnectParams(ConnectParams),
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(4<<20))
}

// clientTransport carries Noise messages on a client stream; Close ends the
// stream and the relay connection it came on.
type clientTransport struct {
	send   func([]byte) error
	recv   func() ([]byte, error)
	cancel context.CancelFunc
	cc     *grpc.ClientConn
	once   sync.Once
}

func (t *clientTransport) Send(b []byte) error { return t.send(b) }

func (t *clientTransport) Recv() ([]byte, error) { return t.recv() }

func (t *clientTransport) Close() error {
	// Not CloseSend, which must not run beside a Send: cancelling ends
	// the stream, and closing the connection ends the rest.
	t.once.Do(func() {
		t.cancel()
		t.cc.Close()
	})
	return nil
}

// DialChannel opens one end-to-end channel to ch's machine: a net.Conn
// whose bytes only the machine can read. When the relay says when to try
// again (retry_after_ms: the machine is moving between its replicas, or a
// rate limit), the dial waits that and tries again while ctx lasts, so that
// the gRPC connection over it comes up as soon as the machine is back
// instead of failing onto its own backoff (up to 2 s between dials).
func DialChannel(ctx context.Context, ch Channel) (net.Conn, error) {
	for {
		c, err := dialChannelOnce(ctx, ch)
		if err == nil {
			return c, nil
		}
		wait, ok := RetryAfter(err)
		if !ok {
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// dialChannelOnce is one try of DialChannel.
func dialChannelOnce(ctx context.Context, ch Channel) (net.Conn, error) {
	p := ch.Pairing
	cc, err := dialRelay(p.Relay, p.RelayCA, p.Token)
	if err != nil {
		return nil, err
	}
	// The stream lives as long as the channel, not as the dial's ctx.
	sctx, cancel := context.WithCancel(context.Background())
	stream, err := pb.NewChannelServiceClient(cc).Open(metadata.AppendToOutgoingContext(sctx, MachineMetadata, p.MachineID))
	if err != nil {
		cancel()
		cc.Close()
		return nil, fmt.Errorf("open a channel through %s: %w", p.Relay, err)
	}
	t := &clientTransport{cancel: cancel, cc: cc,
		send: func(b []byte) error { return stream.Send(&pb.OpenRequest{Data: b}) },
		recv: func() ([]byte, error) {
			m, err := stream.Recv()
			return m.GetData(), err
		}}
	hello, _ := json.Marshal(pairing.Hello{Name: ch.Name})
	c, err := e2ee.Dial(ctx, t, ch.Device, p.MachineID, p.MachineKey, hello)
	if err != nil {
		t.Close()
		var refused *e2ee.RefusedError
		if errors.As(err, &refused) {
			return nil, fmt.Errorf("machine %s refused this device: %s", p.MachineName, refused.Reason)
		}
		return nil, err // e2ee names the channel and the machine
	}
	return c, nil
}

// Pair pairs this device with a machine through its relay, with the code
// `betcode-agent pair` printed there. relayCA is the relay's CA file ("":
// the system roots). relayToken is the Pair call's relay credential: the
// code's Ticket, or, as a session share's code carries none
// (e2ee.PairingCode.ShareUser), the teammate's own relay login.
func Pair(ctx context.Context, code e2ee.PairingCode, relayCA, relayToken string, device e2ee.KeyPair, name string) (Pairing, error) {
	cc, err := dialRelay(code.Relay, relayCA, relayToken)
	if err != nil {
		return Pairing{}, err
	}
	defer cc.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewChannelServiceClient(cc).Pair(metadata.AppendToOutgoingContext(sctx, MachineMetadata, code.MachineID))
	if err != nil {
		return Pairing{}, fmt.Errorf("reach the machine through %s: %w", code.Relay, err)
	}
	t := &clientTransport{cancel: cancel, cc: cc,
		send: func(b []byte) error { return stream.Send(&pb.PairRequest{Data: b}) },
		recv: func() ([]byte, error) {
			m, err := stream.Recv()
			return m.GetData(), err
		}}
	defer t.Close()
	hello, _ := json.Marshal(pairing.Hello{Name: name})
	c, err := e2ee.PairDevice(ctx, t, device, code, hello)
	if err != nil {
		return Pairing{}, err
	}
	raw, err := c.ReadMessage()
	if err != nil {
		return Pairing{}, fmt.Errorf("pairing: the machine's answer: %w", err)
	}
	var w pairing.Welcome
	if err := json.Unmarshal(raw, &w); err != nil {
		return Pairing{}, fmt.Errorf("pairing: the machine's answer is malformed: %w", err)
	}
	if w.Error != "" {
		return Pairing{}, fmt.Errorf("pairing failed on the machine: %s", w.Error)
	}
	if w.MachineID != code.MachineID || w.Token == "" {
		return Pairing{}, errors.New("pairing: the machine's answer names another machine or carries no credential")
	}
	_ = c.WriteMessage([]byte(pairing.Stored))
	return Pairing{MachineID: w.MachineID, MachineName: w.MachineName, Relay: code.Relay, RelayCA: relayCA,
		MachineKey: c.PeerStatic(), Fingerprint: e2ee.Fingerprint(c.PeerStatic()), DeviceID: w.DeviceID,
		Token: w.Token, PairedAt: time.Now().UTC()}, nil
}
