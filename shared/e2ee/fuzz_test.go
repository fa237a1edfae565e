package e2ee

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// Fuzzed sessions are deterministic: fixed static keys, and randomness
// from fixed seeds, so that a recorded session's messages open again when
// the fuzzer replays them, and mutations reach the transport messages.
var (
	fuzzDevice  = mustKeyPair(bytes.Repeat([]byte{'d'}, KeyLen))
	fuzzMachine = mustKeyPair(bytes.Repeat([]byte{'m'}, KeyLen))
	fuzzSecret  = bytes.Repeat([]byte{'s'}, 32)
)

func mustKeyPair(priv []byte) KeyPair {
	k, err := keyPairFromPrivate(priv)
	if err != nil {
		panic(err)
	}
	return k
}

func deviceRand() io.Reader  { return rand.NewChaCha8([32]byte{'d'}) }
func machineRand() io.Reader { return rand.NewChaCha8([32]byte{'m'}) }

func fuzzCode() PairingCode {
	return PairingCode{
		Relay: "relay.example.com:443", MachineID: testMachineID, Fingerprint: Fingerprint(fuzzMachine.Public),
		Offer: "0123456789abcdef", Secret: fuzzSecret, Ticket: "bct_ticket",
	}
}

// Roles FuzzAccept plays against the fuzzed messages: the machine in a
// channel and in a pairing (whose inputs the relay controls first), and the
// device in both.
const (
	roleAccept byte = iota
	roleDial
	rolePairMachine
	rolePairDevice
	roles
)

// joinMessages and splitMessages frame a list of messages in one fuzz
// input: each is a 2-byte big-endian length and its bytes.
func joinMessages(msgs [][]byte) []byte {
	var b []byte
	for _, m := range msgs {
		b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
		b = append(b, m...)
	}
	return b
}

func splitMessages(b []byte) [][]byte {
	var msgs [][]byte
	for len(b) >= 2 && len(msgs) < 32 {
		n := min(int(binary.BigEndian.Uint16(b)), len(b)-2)
		msgs = append(msgs, b[2:2+n])
		b = b[2+n:]
	}
	return msgs
}

// runRole plays role against a peer whose messages are msgs: the handshake,
// then Reads until the channel fails or ends. It never blocks: the script
// Transport returns io.EOF after msgs.
func runRole(role byte, msgs [][]byte) (read []byte, err error) {
	ctx := context.Background()
	s := &script{in: msgs}
	var c *Conn
	switch role {
	case roleAccept:
		c, err = accept(ctx, s, fuzzMachine, testMachineID, func(_, _ []byte) error { return nil }, machineRand())
	case roleDial:
		c, err = dial(ctx, s, fuzzDevice, testMachineID, fuzzMachine.Public, []byte("fuzz"), deviceRand())
	case rolePairMachine:
		c, _, err = pairMachine(ctx, s, fuzzMachine, testMachineID, func(string) ([]byte, error) { return fuzzSecret, nil }, machineRand())
	case rolePairDevice:
		c, err = pairDevice(ctx, s, fuzzDevice, fuzzCode(), []byte("fuzz"), deviceRand())
	}
	if err != nil {
		return nil, err
	}
	defer c.Close()
	buf := make([]byte, 1024)
	for {
		n, err := c.Read(buf)
		read = append(read, buf[:n]...)
		if err != nil {
			return read, err
		}
	}
}

// recordSessions runs a real channel and a real pairing with the fuzz keys
// and randomness, and returns what each role received: the seeds.
func recordSessions(t testing.TB) [roles][][]byte {
	ctx := testCtx(t)
	// record runs one session over a recorded Pipe, with device and machine
	// as its two sides, then a few transport messages each way.
	record := func(device, machine func(Transport) (*Conn, error)) (fromDevice, fromMachine [][]byte) {
		dt, mt := Pipe()
		dr, mr := &recorder{Transport: dt}, &recorder{Transport: mt}
		dch := make(chan result, 1)
		go func() {
			c, err := device(dr)
			dch <- result{c, err}
		}()
		mc, err := machine(mr)
		d := <-dch
		if err != nil || d.err != nil {
			t.Fatalf("the recorded session failed: device %v, machine %v", d.err, err)
		}
		for i, c := range []*Conn{d.c, mc} {
			c.Write([]byte("a transport message"))
			c.Write(bytes.Repeat([]byte{byte(i)}, 3000))
		}
		d.c.Close()
		mc.Close()
		return dr.messages(), mr.messages()
	}
	var seeds [roles][][]byte
	seeds[roleAccept], seeds[roleDial] = record(
		func(t Transport) (*Conn, error) {
			return dial(ctx, t, fuzzDevice, testMachineID, fuzzMachine.Public, []byte("fuzz"), deviceRand())
		},
		func(t Transport) (*Conn, error) {
			return accept(ctx, t, fuzzMachine, testMachineID, func(_, _ []byte) error { return nil }, machineRand())
		})
	seeds[rolePairMachine], seeds[rolePairDevice] = record(
		func(t Transport) (*Conn, error) {
			return pairDevice(ctx, t, fuzzDevice, fuzzCode(), []byte("fuzz"), deviceRand())
		},
		func(t Transport) (*Conn, error) {
			c, _, err := pairMachine(ctx, t, fuzzMachine, testMachineID, func(string) ([]byte, error) { return fuzzSecret, nil }, machineRand())
			return c, err
		})
	return seeds
}

// TestFuzzSeedsOpen checks that the recorded sessions replay: each role
// completes its handshake and reads the peer's bytes, so the fuzzer starts
// from inputs that reach Read.
func TestFuzzSeedsOpen(t *testing.T) {
	seeds := recordSessions(t)
	for role, msgs := range seeds {
		read, err := runRole(byte(role), msgs)
		if err != io.EOF || len(read) != len("a transport message")+3000 {
			t.Errorf("role %d: read %d bytes, %v; want the session's bytes and io.EOF", role, len(read), err)
		}
	}
}

// FuzzAccept feeds arbitrary messages to every side of the handshakes: to
// Accept and PairMachine as the device's messages, to Dial and PairDevice as
// the machine's, and after a handshake that completes, to the Conn's Read.
// Nothing may panic or hang, and what a changed message carries must never
// be read.
func FuzzAccept(f *testing.F) {
	seeds := recordSessions(f)
	var sent [roles][]byte // what each role's recorded peer sent
	for role, msgs := range seeds {
		f.Add(byte(role), joinMessages(msgs))
		f.Add(byte(role), joinMessages(msgs[:1]))
		sent[role], _ = runRole(byte(role), msgs)
	}
	f.Add(roleAccept, []byte{})
	f.Add(roleAccept, joinMessages([][]byte{make([]byte, 96)}))
	f.Fuzz(func(t *testing.T, role byte, data []byte) {
		role %= roles
		msgs := splitMessages(data)
		read, err := runRole(role, msgs)
		if err == nil {
			t.Fatal("runRole ended without an error")
		}
		// Only the recorded session's own messages open, in order: what is
		// read is a prefix of what its peer sent.
		if !bytes.HasPrefix(sent[role], read) {
			t.Fatalf("read %d bytes that the recorded peer never sent", len(read))
		}
	})
}

// FuzzParsePairingCode checks that ParsePairingCode never panics, and that
// a code it accepts is valid and survives String and Parse again.
func FuzzParsePairingCode(f *testing.F) {
	f.Add(typicalCode(f).String())
	f.Add(fuzzCode().String())
	f.Add("betcode-pair:1:")
	f.Add("betcode-pair:2:AAAA")
	f.Add(" betcode-pair:1:" + strings.Repeat("A", 300) + " ")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParsePairingCode(s)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("a parsed code does not validate: %v", err)
		}
		again, err := ParsePairingCode(c.String())
		if err != nil {
			t.Fatalf("the text of a parsed code does not parse: %v", err)
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip: %+v, then %+v", c, again)
		}
	})
}
