package e2e

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/pki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// After its first relayed call, a real agent carries the relay's calls on a
// direct connection (tunnel.DirectOffer); calls keep working. The relay
// refuses every other direct connection: no client certificate, a machine
// with no tunnel here, a wrong token. None of them disturbs the machine's
// calls.
func TestDirectConnection(t *testing.T) {
	w := newWorld(t, "")
	w.startAgent("m1", w.addr)
	cc := w.client()
	api := pb.NewAgentServiceClient(cc)
	ctx := ctxT(t, 60*time.Second)
	if _, err := api.ListSessions(onMachine(ctx, "m1"), &pb.ListSessionsRequest{}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	w.relay.waitLine(t, `calls now go over the machine's direct connection" machine_id=m1`, 30*time.Second)
	for i := range 20 {
		if _, err := api.ListSessions(onMachine(ctx, "m1"), &pb.ListSessionsRequest{}); err != nil {
			t.Fatalf("call %d over the direct connection: %v", i, err)
		}
	}

	ca := filepath.Join(w.pki, pki.CACertFile)
	m1cert, m1key := filepath.Join(w.pki, pki.MachineCertFile("m1")), filepath.Join(w.pki, pki.MachineKeyFile("m1"))
	m2cert, m2key := w.machineCert("m2") // a machine with no tunnel
	for _, tt := range []struct {
		name      string
		cert, key string
		token     []byte
		reason    string
	}{
		{"no client certificate", "", "", bytes.Repeat([]byte{1}, tunnel.DirectTokenLen), `not a machine certificate`},
		{"machine without a tunnel here", m2cert, m2key, bytes.Repeat([]byte{2}, tunnel.DirectTokenLen), `machine m2 has no tunnel on this replica`},
		{"wrong token", m1cert, m1key, bytes.Repeat([]byte{3}, tunnel.DirectTokenLen), `no such direct-connection offer outstanding`},
		{"no token", m1cert, m1key, nil, `no token`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := mtls.ClientConfig(ca, tt.cert, tt.key, "127.0.0.1")
			if err != nil {
				t.Fatal(err)
			}
			cfg.NextProtos = []string{tunnel.ALPNDirect}
			c, err := tls.Dial("tcp", w.addr, cfg)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer c.Close()
			if tt.token != nil {
				c.Write(tt.token)
			} else {
				c.CloseWrite()
			}
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			n, err := c.Read(make([]byte, 64))
			if n != 0 || !errors.Is(err, io.EOF) {
				t.Fatalf("the relay answered a refused direct connection: read %d bytes, %v", n, err)
			}
			w.relay.waitLine(t, `refused a direct connection.*`+tt.reason, 20*time.Second)
		})
	}
	for i := range 5 {
		if _, err := api.ListSessions(onMachine(ctx, "m1"), &pb.ListSessionsRequest{}); err != nil {
			t.Fatalf("call %d after the refused connections: %v", i, err)
		}
	}
}
