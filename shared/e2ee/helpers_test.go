package e2ee

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"
)

// testCtx is a context that ends with the test, bounded so that a hang
// fails rather than stalls.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newKey(t testing.TB) KeyPair {
	t.Helper()
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const testMachineID = "m-testmachine1"

// allow is an authorize that admits the listed device keys.
func allow(keys ...KeyPair) func(devicePub, hello []byte) error {
	return func(devicePub, _ []byte) error {
		for _, k := range keys {
			if string(k.Public) == string(devicePub) {
				return nil
			}
		}
		return errors.New("unknown device: pair it first")
	}
}

// result is one side's outcome of a handshake.
type result struct {
	c   *Conn
	err error
}

// goAccept runs Accept on t in a goroutine; the channel yields its outcome.
func goAccept(ctx context.Context, t Transport, machine KeyPair, machineID string, authorize func(devicePub, hello []byte) error) <-chan result {
	ch := make(chan result, 1)
	go func() {
		c, err := Accept(ctx, t, machine, machineID, authorize)
		ch <- result{c, err}
	}()
	return ch
}

// open runs Dial and Accept over a Pipe and returns both Conns, closed at
// the test's end.
func open(t testing.TB, device, machine KeyPair) (dc, mc *Conn) {
	t.Helper()
	dt, mt := Pipe()
	ctx := testCtx(t)
	acc := goAccept(ctx, mt, machine, testMachineID, allow(device))
	dc, derr := Dial(ctx, dt, device, testMachineID, machine.Public, []byte("test device"))
	res := <-acc
	if derr != nil || res.err != nil {
		t.Fatalf("Dial: %v; Accept: %v", derr, res.err)
	}
	t.Cleanup(func() {
		dc.Close()
		res.c.Close()
	})
	return dc, res.c
}

// recorder is a Transport that keeps what passes through it, and can
// change what it sends (tamper) before it goes.
type recorder struct {
	Transport
	mu     sync.Mutex
	sent   [][]byte
	tamper func(i int, msg []byte) [][]byte // what to send for the i-th message (0 is the first)
}

func (r *recorder) Send(msg []byte) error {
	r.mu.Lock()
	i := len(r.sent)
	r.sent = append(r.sent, append([]byte(nil), msg...))
	r.mu.Unlock()
	out := [][]byte{msg}
	if r.tamper != nil {
		out = r.tamper(i, msg)
	}
	for _, m := range out {
		if err := r.Transport.Send(m); err != nil {
			return err
		}
	}
	return nil
}

func (r *recorder) messages() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.sent...)
}

// script is a Transport whose peer is a list of messages: Recv returns them
// in order, then io.EOF; Send keeps what is sent.
type script struct {
	mu   sync.Mutex
	in   [][]byte
	sent [][]byte
}

func (s *script) Send(msg []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, msg)
	return nil
}

func (s *script) Recv() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.in) == 0 {
		return nil, io.EOF
	}
	m := s.in[0]
	s.in = s.in[1:]
	return append([]byte(nil), m...), nil
}

func (s *script) Close() error { return nil }
