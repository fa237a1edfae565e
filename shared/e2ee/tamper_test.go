package e2ee

import (
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestTampering lets a relay alter the device's transport messages ("one",
// "two", "three"; message 0 is the handshake's): the machine reads what came
// before the change, then the channel fails and stays failed.
func TestTampering(t *testing.T) {
	device, machine := newKey(t), newKey(t)
	for _, tc := range []struct {
		name     string
		tamper   func(i int, msg []byte, held *[]byte) [][]byte
		wantRead []string
	}{
		{
			name: "flipped bit",
			tamper: func(i int, msg []byte, _ *[]byte) [][]byte {
				if i == 2 {
					msg = append([]byte(nil), msg...)
					msg[0] ^= 0x80
				}
				return [][]byte{msg}
			},
			wantRead: []string{"one"},
		},
		{
			name: "flipped tag bit",
			tamper: func(i int, msg []byte, _ *[]byte) [][]byte {
				if i == 1 {
					msg = append([]byte(nil), msg...)
					msg[len(msg)-1] ^= 1
				}
				return [][]byte{msg}
			},
		},
		{
			name: "dropped",
			tamper: func(i int, msg []byte, _ *[]byte) [][]byte {
				if i == 2 {
					return nil
				}
				return [][]byte{msg}
			},
			wantRead: []string{"one"},
		},
		{
			name: "replayed",
			tamper: func(i int, msg []byte, _ *[]byte) [][]byte {
				if i == 1 {
					return [][]byte{msg, msg}
				}
				return [][]byte{msg}
			},
			wantRead: []string{"one"},
		},
		{
			name: "reordered",
			tamper: func(i int, msg []byte, held *[]byte) [][]byte {
				switch i {
				case 2:
					*held = msg
					return nil
				case 3:
					return [][]byte{msg, *held}
				}
				return [][]byte{msg}
			},
			wantRead: []string{"one"},
		},
		{
			name: "truncated",
			tamper: func(i int, msg []byte, _ *[]byte) [][]byte {
				if i == 3 {
					msg = msg[:len(msg)-1]
				}
				return [][]byte{msg}
			},
			wantRead: []string{"one", "two"},
		},
		{
			name: "extended",
			tamper: func(i int, msg []byte, _ *[]byte) [][]byte {
				if i == 1 {
					msg = append(msg, 0)
				}
				return [][]byte{msg}
			},
		},
		{
			name: "injected",
			tamper: func(i int, msg []byte, _ *[]byte) [][]byte {
				if i == 1 {
					return [][]byte{make([]byte, 40), msg}
				}
				return [][]byte{msg}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Goroutines(t)
			dt, mt := Pipe()
			var held []byte
			rec := &recorder{Transport: dt, tamper: func(i int, msg []byte) [][]byte { return tc.tamper(i, msg, &held) }}
			ctx := testCtx(t)
			acc := goAccept(ctx, mt, machine, testMachineID, allow(device))
			dc, err := Dial(ctx, rec, device, testMachineID, machine.Public, nil)
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
			for _, m := range []string{"one", "two", "three"} {
				if err := dc.WriteMessage([]byte(m)); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			buf := make([]byte, 100)
			for {
				n, err := mc.Read(buf)
				if err != nil {
					if !errors.Is(err, ErrIntegrity) || !strings.Contains(err.Error(), "failed authentication") {
						t.Errorf("Read: %v, want ErrIntegrity", err)
					}
					break
				}
				got = append(got, string(buf[:n]))
			}
			if strings.Join(got, ",") != strings.Join(tc.wantRead, ",") {
				t.Errorf("read %q before the failure, want %q", got, tc.wantRead)
			}
			if _, err := mc.Read(buf); !errors.Is(err, ErrIntegrity) {
				t.Errorf("Read after the failure: %v, want ErrIntegrity again", err)
			}
			if _, err := mc.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
				t.Errorf("Write after the failure: %v, want net.ErrClosed (the channel is closed)", err)
			}
		})
	}
}

// TestReplayedChannel records what a device sent on one channel and replays
// it all into a fresh Accept with the same machine key. Message 1 of IK is
// not protected from replay, so the handshake completes; but the machine's
// new ephemeral key makes new session keys, so the recorded transport
// messages fail to open and none of their bytes reach the reader.
func TestReplayedChannel(t *testing.T) {
	leakcheck.Goroutines(t)
	device, machine := newKey(t), newKey(t)
	dt, mt := Pipe()
	rec := &recorder{Transport: dt}
	ctx := testCtx(t)
	acc := goAccept(ctx, mt, machine, testMachineID, allow(device))
	dc, err := Dial(ctx, rec, device, testMachineID, machine.Public, []byte("laptop"))
	if err != nil {
		t.Fatal(err)
	}
	res := <-acc
	if res.err != nil {
		t.Fatal(res.err)
	}
	commands := []string{"delete the branch", "push --force"}
	for _, c := range commands {
		if err := dc.WriteMessage([]byte(c)); err != nil {
			t.Fatal(err)
		}
		if got, err := res.c.ReadMessage(); err != nil || string(got) != c {
			t.Fatalf("original channel: %q, %v", got, err)
		}
	}
	dc.Close()
	res.c.Close()

	recorded := rec.messages()
	if len(recorded) != 1+len(commands) {
		t.Fatalf("recorded %d messages", len(recorded))
	}
	var mu sync.Mutex
	var hellos []string
	replay := &script{in: recorded}
	c, err := Accept(ctx, replay, machine, testMachineID, func(pub, hello []byte) error {
		mu.Lock()
		defer mu.Unlock()
		hellos = append(hellos, string(hello))
		return allow(device)(pub, hello)
	})
	if err != nil {
		t.Fatalf("the replayed handshake: %v (message 1 of IK replays; expected it to complete)", err)
	}
	defer c.Close()
	buf := make([]byte, 100)
	n, err := c.Read(buf)
	if n != 0 || !errors.Is(err, ErrIntegrity) {
		t.Fatalf("Read on the replayed channel: %q, %v; want nothing and ErrIntegrity", buf[:n], err)
	}
	t.Logf("replayed hello %q reached authorize (not forward secret, as documented); no data did", hellos)
}
