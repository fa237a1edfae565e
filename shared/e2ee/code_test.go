package e2ee

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"

	"github.com/betcode-dev/betcode/shared/authtoken"
)

// typicalCode is a code as `betcode-agent pair` makes one.
func typicalCode(t testing.TB) PairingCode {
	t.Helper()
	code, _ := newOffer(t, newKey(t))
	code.MachineID = "m-" + strings.Repeat("k", 12)
	code.Relay = "relay.betcode.dev:443"
	ticket, err := authtoken.New(authtoken.Client)
	if err != nil {
		t.Fatal(err)
	}
	code.Ticket = ticket
	return code
}

func TestPairingCodeRoundTrip(t *testing.T) {
	code := typicalCode(t)
	text := code.String()
	t.Logf("a typical code is %d characters: %s", len(text), text)
	if len(text) >= 250 {
		t.Errorf("a typical code is %d characters; keep it under 250 for QR codes and pasting", len(text))
	}
	if strings.ContainsAny(text, " \t\n") {
		t.Error("the code's text has spaces")
	}
	for _, s := range []string{text, "  " + text + "\n", "\t" + text + "\r\n"} {
		got, err := ParsePairingCode(s)
		if err != nil {
			t.Fatalf("ParsePairingCode(%q): %v", s, err)
		}
		if !reflect.DeepEqual(got, code) {
			t.Errorf("round trip: got %+v, want %+v", got, code)
		}
	}
	if err := code.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// rawCode is the text of a code with the binary fields given, and a
// correct checksum unless badSum.
func rawCode(fields [][]byte, trailer []byte, badSum bool) string {
	var b []byte
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	b = append(b, trailer...)
	sum := crc32.ChecksumIEEE(b)
	if badSum {
		sum++
	}
	b = binary.BigEndian.AppendUint32(b, sum)
	return "betcode-pair:1:" + base64.RawURLEncoding.EncodeToString(b)
}

func TestParsePairingCodeErrors(t *testing.T) {
	good := typicalCode(t)
	fp, _ := ParseFingerprint(good.Fingerprint)
	offer := []byte("\x01\x02\x03\x04\x05\x06\x07\x08")
	fields := func(change func(f [][]byte) [][]byte) [][]byte {
		f := [][]byte{fp, offer, good.Secret, []byte(good.Relay), []byte(good.MachineID), []byte(good.Ticket)}
		return change(f)
	}
	text := good.String()
	for _, tc := range []struct {
		name, text, want string
	}{
		{"empty", "  ", "it is empty"},
		{"wrong prefix", "betcode-join:1:abc", `does not start with "betcode-pair:"`},
		{"a token instead", good.Ticket, `does not start with "betcode-pair:"`},
		{"no version", "betcode-pair:", "no version"},
		{"version not a number", "betcode-pair:v1:abc", `version "v1" is not a number`},
		{"newer version", "betcode-pair:2:abc", "version 2, and this betcode reads version 1"},
		{"not base64url", "betcode-pair:1:ab+/cd", "not base64url"},
		{"padded base64", text + "=", "not base64url"},
		{"space inside", text[:40] + " " + text[40:], "not base64url"},
		{"too short", "betcode-pair:1:AAA", "too short"},
		{"cut when copied", text[:len(text)-10], ""}, // base64 or checksum, whichever notices
		{"altered", alter(text, 30), "checksum does not match"},
		{"too long", "betcode-pair:1:" + strings.Repeat("A", 3000), "more than a pairing code's"},
		{"field cut", rawCode(fields(func(f [][]byte) [][]byte { return f[:4] }), nil, false), "ends inside its machine id field"},
		{"trailing bytes", rawCode(fields(func(f [][]byte) [][]byte { return f }), []byte{0}, false), "1 bytes follow its last field"},
		{"bad checksum", rawCode(fields(func(f [][]byte) [][]byte { return f }), nil, true), "checksum does not match"},
		{"short fingerprint", rawCode(fields(func(f [][]byte) [][]byte { f[0] = f[0][:20]; return f }), nil, false), "fingerprint is 20 bytes"},
		{"short offer", rawCode(fields(func(f [][]byte) [][]byte { f[1] = f[1][:4]; return f }), nil, false), "offer is 4 bytes"},
		{"short secret", rawCode(fields(func(f [][]byte) [][]byte { f[2] = f[2][:15]; return f }), nil, false), "secret is 15 bytes; a pairing needs at least 16 (128 bits)"},
		{"long secret", rawCode(fields(func(f [][]byte) [][]byte { f[2] = make([]byte, 65); return f }), nil, false), "secret is 65 bytes"},
		{"no relay", rawCode(fields(func(f [][]byte) [][]byte { f[3] = nil; return f }), nil, false), "no relay"},
		{"relay without port", rawCode(fields(func(f [][]byte) [][]byte { f[3] = []byte("relay.example.com"); return f }), nil, false), "is not host:port"},
		{"no machine id", rawCode(fields(func(f [][]byte) [][]byte { f[4] = nil; return f }), nil, false), "no machine id"},
		{"control character", rawCode(fields(func(f [][]byte) [][]byte { f[4] = []byte("m-\x00x"); return f }), nil, false), "machine id has a character that is not printable ASCII"},
		{"no ticket", rawCode(fields(func(f [][]byte) [][]byte { f[5] = nil; return f }), nil, false), "no ticket"},
		{"ticket too long", rawCode(fields(func(f [][]byte) [][]byte { f[5] = bytes.Repeat([]byte("t"), 256); return f }), nil, false), "ticket is 256 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePairingCode(tc.text)
			if err == nil {
				t.Fatal("ParsePairingCode succeeded")
			}
			if !errors.Is(err, ErrInvalidPairingCode) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want ErrInvalidPairingCode saying %q", err, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(c *PairingCode)
		want   string
	}{
		{"bad fingerprint", func(c *PairingCode) { c.Fingerprint = "abcd" }, "fingerprint"},
		{"bad offer", func(c *PairingCode) { c.Offer = "ABCDEF0123456789" }, "offer"},
		{"short secret", func(c *PairingCode) { c.Secret = c.Secret[:10] }, "secret is 10 bytes"},
		{"no relay", func(c *PairingCode) { c.Relay = "" }, "no relay"},
		{"space in ticket", func(c *PairingCode) { c.Ticket = "bct_ x" }, "ticket has a character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := typicalCode(t)
			tc.change(&c)
			err := c.Validate()
			if !errors.Is(err, ErrInvalidPairingCode) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: %v, want one saying %q", err, tc.want)
			}
			// What Validate rejects, the text does not carry.
			if _, err := ParsePairingCode(c.String()); err == nil {
				t.Error("the text of an invalid code parses")
			}
		})
	}
}

func TestNewOfferAndSecret(t *testing.T) {
	seen := map[string]bool{}
	for range 10 {
		o, err := NewOfferID()
		if err != nil || !validOffer(o) || seen[o] {
			t.Fatalf("NewOfferID: %q, %v", o, err)
		}
		seen[o] = true
		s, err := NewPairingSecret()
		if err != nil || len(s) != 32 {
			t.Fatalf("NewPairingSecret: %d bytes, %v", len(s), err)
		}
	}
}

// alter changes the i-th character of a code's text to another base64url
// character.
func alter(text string, i int) string {
	c := "A"
	if text[i] == 'A' {
		c = "B"
	}
	return text[:i] + c + text[i+1:]
}
