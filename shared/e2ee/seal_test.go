package e2ee

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func testSealed(t testing.TB) Sealed {
	t.Helper()
	id, err := NewSealedID()
	if err != nil {
		t.Fatal(err)
	}
	return Sealed{V: 1, ID: id, At: 1733400000000, Kind: SealedQueue, SessionID: "s-1", Text: "hello"}
}

func TestSealRoundTrip(t *testing.T) {
	device, machine := newKey(t), newKey(t)
	payload := []byte(`{"v":1}`)
	sealed, err := Seal(device, testMachineID, machine.Public, payload)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, payload) {
		t.Fatal("the envelope carries its payload in clear")
	}
	pub, got, err := OpenSealed(machine, testMachineID, sealed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("payload %q, want %q", got, payload)
	}
	if !bytes.Equal(pub, device.Public) {
		t.Fatal("the opened envelope does not name the device that sealed it")
	}
	again, _ := Seal(device, testMachineID, machine.Public, payload)
	if bytes.Equal(again, sealed) {
		t.Fatal("two envelopes of the same payload are equal: no fresh ephemeral key")
	}
}

func TestOpenSealedRefuses(t *testing.T) {
	device, machine, other := newKey(t), newKey(t), newKey(t)
	sealed, err := Seal(device, testMachineID, machine.Public, []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		machine KeyPair
		id      string
		sealed  []byte
	}{
		{"wrong machine key", other, testMachineID, sealed},
		{"wrong machine id", machine, "m-other", sealed},
		{"truncated", machine, testMachineID, sealed[:len(sealed)-1]},
		{"empty", machine, testMachineID, nil},
		{"too long", machine, testMachineID, make([]byte, 65536)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := OpenSealed(tc.machine, tc.id, tc.sealed); !errors.Is(err, ErrSealedInvalid) {
				t.Fatalf("err = %v, want ErrSealedInvalid", err)
			}
		})
	}
	// Every byte matters: the ephemeral key, the device's key, the payload
	// and the tags.
	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x01
		if _, _, err := OpenSealed(machine, testMachineID, bad); !errors.Is(err, ErrSealedInvalid) {
			t.Fatalf("byte %d changed: err = %v, want ErrSealedInvalid", i, err)
		}
	}
}

// A device key the relay substitutes is refused: the envelope's s is
// authenticated by ss, so the machine learns the real sender's key.
func TestOpenSealedNamesTheRealSender(t *testing.T) {
	device, relay, machine := newKey(t), newKey(t), newKey(t)
	sealed, err := Seal(relay, testMachineID, machine.Public, []byte("forged"))
	if err != nil {
		t.Fatal(err)
	}
	pub, _, err := OpenSealed(machine, testMachineID, sealed)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(pub, device.Public) {
		t.Fatal("an envelope sealed with another key names the device")
	}
}

func TestSealedValidate(t *testing.T) {
	ok := testSealed(t)
	perm := Sealed{V: 1, ID: ok.ID, At: 1, Kind: SealedPermission, SessionID: "s-1", RequestID: "r-1", Behavior: "deny"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := perm.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Sealed)
	}{
		{"version", func(s *Sealed) { s.V = 2 }},
		{"short id", func(s *Sealed) { s.ID = "abc" }},
		{"upper-case id", func(s *Sealed) { s.ID = strings.ToUpper(s.ID) }},
		{"no time", func(s *Sealed) { s.At = 0 }},
		{"no session", func(s *Sealed) { s.SessionID = "" }},
		{"bad kind", func(s *Sealed) { s.Kind = "exec" }},
		{"no text", func(s *Sealed) { s.Text = "" }},
		{"long text", func(s *Sealed) { s.Text = strings.Repeat("x", MaxSealedText+1) }},
		{"queue with behavior", func(s *Sealed) { s.Behavior = "allow" }},
		{"permission without request", func(s *Sealed) { *s = perm; s.RequestID = "" }},
		{"permission behavior", func(s *Sealed) { *s = perm; s.Behavior = "always" }},
		{"permission with text", func(s *Sealed) { *s = perm; s.Text = "x" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.mod(&s)
			if err := s.Validate(); err == nil {
				t.Fatalf("%+v validates", s)
			}
		})
	}
}

func TestSealMessageParse(t *testing.T) {
	device, machine := newKey(t), newKey(t)
	want := testSealed(t)
	sealed, err := SealMessage(device, testMachineID, machine.Public, want)
	if err != nil {
		t.Fatal(err)
	}
	_, payload, err := OpenSealed(machine, testMachineID, sealed)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(payload), `"session_id":"s-1"`) {
		t.Fatalf("payload %s does not use the wire names", payload)
	}
	got, err := ParseSealed(payload)
	if err != nil || got != want {
		t.Fatalf("ParseSealed = %+v, %v; want %+v", got, err, want)
	}
	if _, err := SealMessage(device, testMachineID, machine.Public, Sealed{V: 1}); err == nil {
		t.Fatal("an invalid payload was sealed")
	}
}

// FuzzOpenSealed feeds arbitrary envelopes to OpenSealed and ParseSealed:
// nothing may panic, and only an envelope sealed with the fuzz device's key
// (the seeds) may open as the device's.
func FuzzOpenSealed(f *testing.F) {
	for _, p := range []string{`{"v":1}`, "", `{"v":1,"id":"00112233445566778899aabbccddeeff","at":1,"kind":"queue","session_id":"s","text":"t"}`} {
		sealed, err := seal(fuzzDevice, testMachineID, fuzzMachine.Public, []byte(p), deviceRand())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(sealed)
	}
	f.Add([]byte{})
	f.Add(make([]byte, sealOverhead))
	f.Fuzz(func(t *testing.T, sealed []byte) {
		pub, payload, err := OpenSealed(fuzzMachine, testMachineID, sealed)
		if err != nil {
			if !errors.Is(err, ErrSealedInvalid) {
				t.Fatalf("error %v does not wrap ErrSealedInvalid", err)
			}
			return
		}
		if len(pub) != KeyLen {
			t.Fatalf("opened with a %d-byte device key", len(pub))
		}
		if s, err := ParseSealed(payload); err == nil {
			if err := s.Validate(); err != nil {
				t.Fatalf("a parsed payload does not validate: %v", err)
			}
		}
	})
}
