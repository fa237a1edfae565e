package e2ee

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/flynn/noise"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// offers is a machine's table of pairing offers, single use.
type offers struct {
	mu      sync.Mutex
	secrets map[string][]byte
}

var errUnknownOffer = errors.New("unknown or used offer")

func (o *offers) lookup(offer string) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.secrets[offer]
	if !ok {
		return nil, errUnknownOffer
	}
	delete(o.secrets, offer)
	return s, nil
}

// newOffer makes a pairing code for machine and the table that holds it.
func newOffer(t testing.TB, machine KeyPair) (PairingCode, *offers) {
	t.Helper()
	secret, err := NewPairingSecret()
	if err != nil {
		t.Fatal(err)
	}
	offer, err := NewOfferID()
	if err != nil {
		t.Fatal(err)
	}
	code := PairingCode{
		Relay:       "relay.example.com:443",
		MachineID:   testMachineID,
		Fingerprint: Fingerprint(machine.Public),
		Offer:       offer,
		Secret:      secret,
		Ticket:      "bct_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefgAbCdEf",
	}
	return code, &offers{secrets: map[string][]byte{offer: secret}}
}

// pairResult is the machine's outcome of a pairing.
type pairResult struct {
	c     *Conn
	hello []byte
	err   error
}

func goPairMachine(ctx context.Context, t Transport, machine KeyPair, machineID string, lookup func(string) ([]byte, error)) <-chan pairResult {
	ch := make(chan pairResult, 1)
	go func() {
		c, hello, err := PairMachine(ctx, t, machine, machineID, lookup)
		ch <- pairResult{c, hello, err}
	}()
	return ch
}

func TestPairing(t *testing.T) {
	leakcheck.Goroutines(t)
	device, machine := newKey(t), newKey(t)
	code, table := newOffer(t, machine)
	ctx := testCtx(t)
	dt, mt := Pipe()
	pm := goPairMachine(ctx, mt, machine, testMachineID, table.lookup)
	dc, err := PairDevice(ctx, dt, device, code, []byte("laptop"))
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	res := <-pm
	if res.err != nil {
		t.Fatal(res.err)
	}
	mc := res.c
	defer mc.Close()
	if string(res.hello) != "laptop" {
		t.Errorf("hello %q", res.hello)
	}
	if !bytes.Equal(dc.PeerStatic(), machine.Public) || !bytes.Equal(mc.PeerStatic(), device.Public) {
		t.Error("PeerStatic is not the other side's key")
	}
	if got := mc.RemoteAddr().(Addr); got.Role != RoleDevice || got.Fingerprint != Fingerprint(device.Public) {
		t.Errorf("the machine's RemoteAddr: %+v", got)
	}
	// What the machine hands the device after pairing.
	if err := mc.WriteMessage([]byte("bct_devicetoken")); err != nil {
		t.Fatal(err)
	}
	if err := mc.WriteMessage([]byte("build-box")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bct_devicetoken", "build-box"} {
		if got, err := dc.ReadMessage(); err != nil || string(got) != want {
			t.Errorf("ReadMessage: %q, %v; want %q", got, err, want)
		}
	}
	if err := dc.WriteMessage([]byte("thanks")); err != nil {
		t.Fatal(err)
	}
	if got, err := mc.ReadMessage(); err != nil || string(got) != "thanks" {
		t.Errorf("machine ReadMessage: %q, %v", got, err)
	}
	if _, err := table.lookup(code.Offer); !errors.Is(err, errUnknownOffer) {
		t.Error("the offer is still there after a pairing")
	}

	// The keys each side learned open a channel.
	dt2, mt2 := Pipe()
	acc := goAccept(ctx, mt2, machine, testMachineID, allow(KeyPair{Public: mc.PeerStatic()}))
	c, err := Dial(ctx, dt2, device, code.MachineID, dc.PeerStatic(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if r := <-acc; r.err != nil {
		t.Error(r.err)
	} else {
		r.c.Close()
	}
}

func TestPairingFailures(t *testing.T) {
	device, machine, attacker := newKey(t), newKey(t), newKey(t)
	errExpired := errors.New("the offer expired 2 minutes ago")
	type setup struct {
		code      PairingCode // what the device holds
		machine   KeyPair     // what answers it
		machineID string
		lookup    func(string) ([]byte, error)
	}
	for _, tc := range []struct {
		name          string
		arrange       func(s *setup)
		deviceTamper  func(int, []byte) [][]byte
		machineTamper func(int, []byte) [][]byte
		wantDevice    []error
		wantMachine   error // nil: PairMachine succeeds
		machineText   string
	}{
		{
			name: "wrong secret",
			arrange: func(s *setup) {
				s.code.Secret = bytes.Repeat([]byte{7}, 32)
			},
			wantDevice:  []error{ErrPairingFailed},
			wantMachine: ErrPairingFailed, machineText: "did not prove the pairing secret",
		},
		{
			name: "relay substitutes the machine without the secret",
			arrange: func(s *setup) {
				s.machine = attacker
				s.lookup = func(string) ([]byte, error) { return bytes.Repeat([]byte{1}, 32), nil }
			},
			wantDevice:  []error{ErrPairingFailed, ErrKeyMismatch},
			wantMachine: ErrPairingFailed, machineText: "ended the exchange after seeing this machine's key",
		},
		{
			name:        "leaked code, attacker's own key",
			arrange:     func(s *setup) { s.machine = attacker },
			wantDevice:  []error{ErrPairingFailed, ErrKeyMismatch},
			wantMachine: ErrPairingFailed, machineText: "ended the exchange after seeing this machine's key",
		},
		{
			name: "unknown offer",
			arrange: func(s *setup) {
				s.code.Offer = "0000000000000000"
			},
			wantDevice:  []error{ErrPairingFailed},
			wantMachine: errUnknownOffer,
		},
		{
			name: "expired offer",
			arrange: func(s *setup) {
				s.lookup = func(string) ([]byte, error) { return nil, errExpired }
			},
			wantDevice:  []error{ErrPairingFailed},
			wantMachine: errExpired,
		},
		{
			name:        "code names another machine id",
			arrange:     func(s *setup) { s.code.MachineID = "m-othermachine" },
			wantDevice:  []error{ErrPairingFailed},
			wantMachine: ErrPairingFailed, machineText: "names another machine id",
		},
		{
			name:    "message 1 altered",
			arrange: func(*setup) {},
			deviceTamper: func(i int, msg []byte) [][]byte {
				if i == 0 {
					msg = append([]byte(nil), msg...)
					msg[len(msg)-1] ^= 1
				}
				return [][]byte{msg}
			},
			wantDevice:  []error{ErrPairingFailed},
			wantMachine: ErrPairingFailed, machineText: "pairing message 1 did not authenticate",
		},
		{
			name:         "message 3 altered",
			arrange:      func(*setup) {},
			deviceTamper: func(i int, msg []byte) [][]byte { return flipFirst(i-1, msg) },
			wantDevice:   []error{ErrPairingFailed},
			wantMachine:  ErrPairingFailed, machineText: "did not prove",
		},
		{
			name:          "confirmation altered",
			arrange:       func(*setup) {},
			machineTamper: func(i int, msg []byte) [][]byte { return flipFirst(i-1, msg) },
			wantDevice:    []error{ErrPairingFailed},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Goroutines(t)
			code, table := newOffer(t, machine)
			s := setup{code: code, machine: machine, machineID: testMachineID, lookup: table.lookup}
			tc.arrange(&s)
			ctx := testCtx(t)
			dt, mt := Pipe()
			pm := goPairMachine(ctx, &recorder{Transport: mt, tamper: tc.machineTamper}, s.machine, s.machineID, s.lookup)
			dc, derr := PairDevice(ctx, &recorder{Transport: dt, tamper: tc.deviceTamper}, device, s.code, []byte("laptop"))
			res := <-pm
			if res.c != nil {
				res.c.Close()
			}
			if dc != nil {
				dc.Close()
				t.Fatal("PairDevice succeeded")
			}
			for _, want := range tc.wantDevice {
				if !errors.Is(derr, want) {
					t.Errorf("PairDevice: %v, want it to wrap %q", derr, want)
				}
			}
			switch {
			case tc.wantMachine == nil && tc.machineText == "":
				if res.err != nil {
					t.Errorf("PairMachine: %v", res.err)
				}
			case res.err == nil:
				t.Error("PairMachine succeeded")
			case tc.wantMachine != nil && !errors.Is(res.err, tc.wantMachine):
				t.Errorf("PairMachine: %v, want it to wrap %q", res.err, tc.wantMachine)
			case !strings.Contains(res.err.Error(), tc.machineText):
				t.Errorf("PairMachine: %v, want it to say %q", res.err, tc.machineText)
			}
			t.Logf("device: %v", derr)
			t.Logf("machine: %v", res.err)
		})
	}
}

func TestPairDeviceChecksTheCode(t *testing.T) {
	code, _ := newOffer(t, newKey(t))
	code.Secret = code.Secret[:8]
	s := &script{}
	_, err := PairDevice(testCtx(t), s, newKey(t), code, nil)
	if !errors.Is(err, ErrInvalidPairingCode) || len(s.sent) != 0 {
		t.Errorf("PairDevice with a short secret: %v (sent %d messages)", err, len(s.sent))
	}
}

func TestPairingGivesUpWithContext(t *testing.T) {
	leakcheck.Goroutines(t)
	machine := newKey(t)
	code, table := newOffer(t, machine)
	dt, mt := Pipe()
	defer dt.Close()
	ctx, cancel := context.WithCancel(testCtx(t))
	pm := goPairMachine(ctx, mt, machine, testMachineID, table.lookup)
	// Message 1, then nothing: the machine waits for message 3.
	hs, err := newTestPairDevice(code)
	if err != nil {
		t.Fatal(err)
	}
	msg1, _, _, _ := hs.WriteMessage(nil, []byte(code.Offer))
	dt.Send(msg1)
	if _, err := dt.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if r := <-pm; !errors.Is(r.err, context.Canceled) {
		t.Errorf("PairMachine: %v, want context.Canceled", r.err)
	}
}

// newTestPairDevice is the device's handshake state of a pairing, for tests
// that play the device by hand.
func newTestPairDevice(code PairingCode) (*noise.HandshakeState, error) {
	psk, err := pairingPSK(code.Secret, code.MachineID, code.Offer)
	if err != nil {
		return nil, err
	}
	k, err := GenerateKey()
	if err != nil {
		return nil, err
	}
	return noise.NewHandshakeState(pairConfig(true, k, code.MachineID, psk, nil))
}
