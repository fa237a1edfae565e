package e2ee

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

func TestDialAccept(t *testing.T) {
	leakcheck.Goroutines(t)
	device, machine := newKey(t), newKey(t)
	dt, mt := Pipe()
	ctx := testCtx(t)
	var gotPub, gotHello []byte
	acc := goAccept(ctx, mt, machine, testMachineID, func(devicePub, hello []byte) error {
		gotPub, gotHello = devicePub, hello
		return nil
	})
	dc, err := Dial(ctx, dt, device, testMachineID, machine.Public, []byte("laptop betcode/1.2"))
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	res := <-acc
	if res.err != nil {
		t.Fatal(res.err)
	}
	mc := res.c
	defer mc.Close()

	if !bytes.Equal(gotPub, device.Public) || string(gotHello) != "laptop betcode/1.2" {
		t.Errorf("authorize got key %x hello %q", gotPub, gotHello)
	}
	if !bytes.Equal(dc.PeerStatic(), machine.Public) || !bytes.Equal(mc.PeerStatic(), device.Public) {
		t.Error("PeerStatic is not the other side's key")
	}
	wantAddrs := []struct {
		got  any
		want Addr
	}{
		{dc.LocalAddr(), Addr{RoleDevice, testMachineID, Fingerprint(device.Public)}},
		{dc.RemoteAddr(), Addr{RoleMachine, testMachineID, Fingerprint(machine.Public)}},
		{mc.LocalAddr(), Addr{RoleMachine, testMachineID, Fingerprint(machine.Public)}},
		{mc.RemoteAddr(), Addr{RoleDevice, testMachineID, Fingerprint(device.Public)}},
	}
	for _, a := range wantAddrs {
		if a.got != a.want {
			t.Errorf("addr %v, want %v", a.got, a.want)
		}
	}
	if s := mc.RemoteAddr().String(); s != "e2ee:device:"+FingerprintID(device.Public) {
		t.Errorf("RemoteAddr().String() = %q", s)
	}
	if n := mc.RemoteAddr().Network(); n != "betcode-e2ee" {
		t.Errorf("Network() = %q", n)
	}

	for _, dir := range []struct {
		name     string
		from, to *Conn
	}{{"device to machine", dc, mc}, {"machine to device", mc, dc}} {
		if _, err := dir.from.Write([]byte("hello, " + dir.name)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 100)
		n, err := dir.to.Read(buf)
		if err != nil || string(buf[:n]) != "hello, "+dir.name {
			t.Errorf("%s: read %q, %v", dir.name, buf[:n], err)
		}
	}
}

func TestLargeWrites(t *testing.T) {
	leakcheck.Goroutines(t)
	dc, mc := open(t, newKey(t), newKey(t))
	want := make([]byte, 1<<20)
	rand.Read(want)
	// Both directions at once: each side writes 1 MiB while it reads 1 MiB.
	var wg sync.WaitGroup
	for _, c := range []*Conn{dc, mc} {
		wg.Go(func() {
			if n, err := c.Write(want); err != nil || n != len(want) {
				t.Errorf("Write: %d, %v", n, err)
			}
		})
		wg.Go(func() {
			got := make([]byte, len(want))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Errorf("ReadFull: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Error("the bytes read differ from the bytes written")
			}
		})
	}
	wg.Wait()
}

// TestConcurrentWrites checks that Writes from several goroutines each
// arrive whole, while the other side echoes and this side reads.
func TestConcurrentWrites(t *testing.T) {
	leakcheck.Goroutines(t)
	dc, mc := open(t, newKey(t), newKey(t))
	const writers, records, size = 8, 50, 100 << 10 // records span messages
	var echo sync.WaitGroup
	echo.Go(func() {
		if _, err := io.Copy(mc, mc); err != nil {
			t.Errorf("echo: %v", err)
		}
	})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rec := bytes.Repeat([]byte{byte('a' + w)}, size)
			for range records {
				if _, err := dc.Write(rec); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	counts := make(map[byte]int)
	rec := make([]byte, size)
	for range writers * records {
		if _, err := io.ReadFull(dc, rec); err != nil {
			t.Fatal(err)
		}
		if bytes.Count(rec, rec[:1]) != size {
			t.Fatalf("a record of %q mixes bytes of several writers", rec[0])
		}
		counts[rec[0]]++
	}
	wg.Wait()
	for w := range writers {
		if counts[byte('a'+w)] != records {
			t.Errorf("writer %d: %d records echoed, want %d", w, counts[byte('a'+w)], records)
		}
	}
	dc.Close() // ends the echo: the machine reads io.EOF
	echo.Wait()
}

func TestRefused(t *testing.T) {
	leakcheck.Goroutines(t)
	device, machine := newKey(t), newKey(t)
	dt, mt := Pipe()
	ctx := testCtx(t)
	errRevoked := errors.New("device laptop was revoked on 2026-10-01")
	acc := goAccept(ctx, mt, machine, testMachineID, func(_, _ []byte) error { return errRevoked })
	_, err := Dial(ctx, dt, device, testMachineID, machine.Public, nil)
	var refused *RefusedError
	if !errors.As(err, &refused) || !errors.Is(err, ErrRefused) {
		t.Fatalf("Dial: %v, want a *RefusedError", err)
	}
	if refused.Reason != errRevoked.Error() {
		t.Errorf("reason %q, want %q", refused.Reason, errRevoked.Error())
	}
	t.Logf("device sees: %v", err)
	res := <-acc
	if !errors.Is(res.err, ErrRefused) || !errors.Is(res.err, errRevoked) {
		t.Errorf("Accept: %v, want ErrRefused and authorize's error", res.err)
	}
	t.Logf("machine sees: %v", res.err)
}

func TestRefusalReasonIsBounded(t *testing.T) {
	long := strings.Repeat("é", MaxReason) // 2 bytes each
	refused, err := parseAnswer(encodeAnswer(errors.New(long)))
	if err != nil {
		t.Fatal(err)
	}
	if len(refused.Reason) > MaxReason || !strings.HasPrefix(long, refused.Reason) {
		t.Errorf("reason of %d bytes is not a prefix within %d", len(refused.Reason), MaxReason)
	}
}

func TestParseAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload []byte
		refused string
		err     string
	}{
		{"ok", []byte{0}, "", ""},
		{"refused", []byte("\x01no"), "no", ""},
		{"refused without reason", []byte{1}, "", ""},
		{"empty", nil, "", "empty"},
		{"ok with more", []byte{0, 1}, "", "after its status"},
		{"unknown status", []byte{7}, "", "status 7"},
		{"reason too long", append([]byte{1}, make([]byte, MaxReason+1)...), "", "over the limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refused, err := parseAnswer(tc.payload)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want one with %q", err, tc.err)
				}
			case err != nil:
				t.Errorf("error %v", err)
			case tc.name == "ok" && refused != nil:
				t.Errorf("refused: %v", refused)
			case tc.name != "ok" && (refused == nil || refused.Reason != tc.refused):
				t.Errorf("refused %v, want reason %q", refused, tc.refused)
			}
		})
	}
}

// flipFirst is a tamper that flips a bit of the first message.
func flipFirst(i int, msg []byte) [][]byte {
	if i == 0 {
		msg = append([]byte(nil), msg...)
		msg[len(msg)/2] ^= 1
	}
	return [][]byte{msg}
}

func TestHandshakeFailures(t *testing.T) {
	device, machine, other := newKey(t), newKey(t), newKey(t)
	for _, tc := range []struct {
		name          string
		machinePub    []byte // what the device pinned
		dialID        string
		authorize     func(devicePub, hello []byte) error
		deviceTamper  func(int, []byte) [][]byte // on what the device sends
		machineTamper func(int, []byte) [][]byte // on what the machine sends
		wantDevice    string
		wantMachine   string // "" when Accept succeeds
	}{
		{
			name: "unknown device", machinePub: machine.Public, dialID: testMachineID, authorize: allow(other),
			wantDevice: "refused: unknown device: pair it first", wantMachine: "refused: unknown device",
		},
		{
			name: "wrong machine key at the device", machinePub: other.Public, dialID: testMachineID, authorize: allow(device),
			wantDevice: "ended the channel without answering", wantMachine: "did not authenticate",
		},
		{
			name: "wrong machine id at the device", machinePub: machine.Public, dialID: "m-someoneelse", authorize: allow(device),
			wantDevice: "ended the channel without answering", wantMachine: "did not authenticate",
		},
		{
			name: "message 1 altered", machinePub: machine.Public, dialID: testMachineID, authorize: allow(device),
			deviceTamper: flipFirst,
			wantDevice:   "ended the channel without answering", wantMachine: "did not authenticate",
		},
		{
			name: "message 2 altered", machinePub: machine.Public, dialID: testMachineID, authorize: allow(device),
			machineTamper: flipFirst,
			wantDevice:    "answer did not authenticate",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Goroutines(t)
			dt, mt := Pipe()
			ctx := testCtx(t)
			acc := goAccept(ctx, &recorder{Transport: mt, tamper: tc.machineTamper}, machine, testMachineID, tc.authorize)
			dc, derr := Dial(ctx, &recorder{Transport: dt, tamper: tc.deviceTamper}, device, tc.dialID, tc.machinePub, nil)
			res := <-acc
			if res.c != nil {
				res.c.Close()
			}
			if dc != nil {
				dc.Close()
				t.Fatal("Dial succeeded")
			}
			if derr == nil || !strings.Contains(derr.Error(), tc.wantDevice) {
				t.Errorf("Dial: %v, want an error with %q", derr, tc.wantDevice)
			}
			switch {
			case tc.wantMachine == "" && res.err != nil:
				t.Errorf("Accept: %v", res.err)
			case tc.wantMachine != "" && (res.err == nil || !strings.Contains(res.err.Error(), tc.wantMachine)):
				t.Errorf("Accept: %v, want an error with %q", res.err, tc.wantMachine)
			}
			t.Logf("device: %v", derr)
			t.Logf("machine: %v", res.err)
		})
	}
}

// TestManInTheMiddle puts a relay that holds keys of its own between the
// device and the machine: it answers the device as the machine (Accept
// with its own key) and calls the machine as a device (Dial with its own
// key). Without the machine's private key it can do neither.
func TestManInTheMiddle(t *testing.T) {
	leakcheck.Goroutines(t)
	device, machine, mitm := newKey(t), newKey(t), newKey(t)
	ctx := testCtx(t)
	dt, toDevice := Pipe()
	toMachine, mt := Pipe()
	acc := goAccept(ctx, mt, machine, testMachineID, allow(device))
	fake := goAccept(ctx, toDevice, mitm, testMachineID, func(_, _ []byte) error { return nil })
	var mitmDial error
	var wg sync.WaitGroup
	wg.Go(func() {
		c, err := Dial(ctx, toMachine, mitm, testMachineID, machine.Public, []byte("totally the laptop"))
		if c != nil {
			c.Close()
		}
		mitmDial = err
	})
	dc, derr := Dial(ctx, dt, device, testMachineID, machine.Public, nil)
	if dc != nil {
		dc.Close()
	}
	wg.Wait()
	if derr == nil {
		t.Error("the device's Dial succeeded through the man in the middle")
	}
	if r := <-fake; r.err == nil || !strings.Contains(r.err.Error(), "did not authenticate") {
		t.Errorf("the man in the middle's Accept: %v, want a failure to authenticate", r.err)
		if r.c != nil {
			r.c.Close()
		}
	}
	if !errors.Is(mitmDial, ErrRefused) {
		t.Errorf("the man in the middle's Dial: %v, want a refusal", mitmDial)
	}
	if r := <-acc; !errors.Is(r.err, ErrRefused) {
		t.Errorf("the machine's Accept: %v, want a refusal", r.err)
	}
}

func TestHandshakeGivesUpWithContext(t *testing.T) {
	device, machine := newKey(t), newKey(t)
	t.Run("dial", func(t *testing.T) {
		leakcheck.Goroutines(t)
		dt, mt := Pipe()
		defer mt.Close() // ends the Recv Dial leaves waiting
		ctx, cancel := context.WithCancel(testCtx(t))
		done := make(chan error, 1)
		go func() {
			_, err := Dial(ctx, dt, device, testMachineID, machine.Public, nil)
			done <- err
		}()
		if _, err := mt.Recv(); err != nil { // message 1: Dial now waits for message 2
			t.Fatal(err)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Dial: %v, want context.Canceled", err)
		}
		if _, err := mt.Recv(); err != io.EOF {
			t.Errorf("the machine's side after Dial gave up: %v, want io.EOF (Dial closes its side)", err)
		}
	})
	t.Run("accept", func(t *testing.T) {
		leakcheck.Goroutines(t)
		dt, mt := Pipe()
		defer dt.Close()
		ctx, cancel := context.WithCancel(testCtx(t))
		cancel()
		if _, err := Accept(ctx, mt, machine, testMachineID, allow(device)); !errors.Is(err, context.Canceled) {
			t.Errorf("Accept: %v, want context.Canceled", err)
		}
	})
}

func TestHandshakeMessageBounds(t *testing.T) {
	leakcheck.Goroutines(t)
	machine := newKey(t)
	for _, tc := range []struct {
		name string
		msg  []byte
		want string
	}{
		{"over the Noise limit", make([]byte, 65536), "over the Noise limit"},
		{"empty", nil, "did not authenticate"},
		{"short", make([]byte, 40), "did not authenticate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Accept(testCtx(t), &script{in: [][]byte{tc.msg}}, machine, testMachineID, allow())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Accept: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestDialChecksArguments(t *testing.T) {
	device, machine := newKey(t), newKey(t)
	for _, tc := range []struct {
		name       string
		device     KeyPair
		id         string
		machinePub []byte
		hello      []byte
		want       string
	}{
		{"no machine id", device, "", machine.Public, nil, "no machine id"},
		{"short machine key", device, testMachineID, machine.Public[:31], nil, "31 bytes"},
		{"no device key", KeyPair{}, testMachineID, machine.Public, nil, "device key"},
		{"hello too long", device, testMachineID, machine.Public, make([]byte, MaxHello+1), "hello of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{}
			_, err := Dial(testCtx(t), s, tc.device, tc.id, tc.machinePub, tc.hello)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Dial: %v, want an error with %q", err, tc.want)
			}
			if len(s.sent) != 0 {
				t.Error("Dial sent a message despite bad arguments")
			}
		})
	}
}
