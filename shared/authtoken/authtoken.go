// Package authtoken defines BetCode's bearer secrets: client access tokens
// ("bct_…") and single-use machine join tokens ("bcj_…"). A token is 256
// random bits in base62 behind a recognisable prefix, so that secret
// scanners can find a leaked one, followed by a CRC-32 checksum, so that a
// mistyped token is told apart from a wrong one without a database lookup.
// Only the SHA-256 of a token is ever stored.
package authtoken

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"math/big"
	"strings"
)

// Kind is what a token is for; it is the token's prefix.
type Kind string

// Token kinds.
const (
	// Client tokens authenticate users' calls ("authorization: Bearer …").
	Client Kind = "bct"
	// Join tokens enroll one machine, once.
	Join Kind = "bcj"
)

const (
	secretLen   = 43 // base62 digits of 256 bits
	checksumLen = 6  // base62 digits of 32 bits
	// Len is the length of every token.
	Len = 3 + 1 + secretLen + checksumLen
)

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// inAlphabet marks alphabet's bytes.
var inAlphabet = func() (t [256]bool) {
	for i := range len(alphabet) {
		t[alphabet[i]] = true
	}
	return t
}()

// ErrMalformed is wrapped by Parse's errors.
var ErrMalformed = errors.New("malformed token")

// New returns a new random token of kind k.
func New(k Kind) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	body := encode(new(big.Int).SetBytes(b[:]), secretLen)
	return string(k) + "_" + body + checksum(string(k)+"_"+body), nil
}

// Parse checks that s is a well-formed token of kind k (prefix, length,
// alphabet, checksum) and returns its Hash. It never says more about a bad
// token than which of those failed.
func Parse(k Kind, s string) ([]byte, error) {
	if err := Check(k, s); err != nil {
		return nil, err
	}
	return Hash(s), nil
}

// Check reports whether s is a well-formed token of kind k.
func Check(k Kind, s string) error {
	prefix := string(k) + "_"
	if !strings.HasPrefix(s, prefix) {
		other := Client
		if k == Client {
			other = Join
		}
		if strings.HasPrefix(s, string(other)+"_") {
			return fmt.Errorf("%w: this is a %s, not a %s", ErrMalformed, other.describe(), k.describe())
		}
		return fmt.Errorf("%w: a %s starts with %q", ErrMalformed, k.describe(), prefix)
	}
	if len(s) != Len {
		return fmt.Errorf("%w: want %d characters, got %d (was it cut short?)", ErrMalformed, Len, len(s))
	}
	for i := len(prefix); i < len(s); i++ {
		if !inAlphabet[s[i]] {
			return fmt.Errorf("%w: unexpected character at position %d", ErrMalformed, i+1)
		}
	}
	body := s[:len(s)-checksumLen]
	if checksum(body) != s[len(s)-checksumLen:] {
		return fmt.Errorf("%w: checksum does not match (a typo?)", ErrMalformed)
	}
	return nil
}

// Hash is what the relay stores and looks tokens up by: SHA-256 of the
// whole token. (256 random bits need no slow hash.)
func Hash(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// ID is a token's public id, derived from its hash: safe to show and log,
// useless to authenticate with.
func ID(hash []byte) string {
	if len(hash) < 6 {
		return ""
	}
	return hex.EncodeToString(hash[:6])
}

func (k Kind) describe() string {
	if k == Join {
		return "join token"
	}
	return "client token"
}

// checksum is the base62 CRC-32 of s. It runs on every authenticated call,
// so it works on a machine word (math/big cost the relay about 9 µs of CPU
// per call, most of it in growing the handler goroutine's stack).
func checksum(s string) string { return base62Checksum(crc32.ChecksumIEEE([]byte(s))) }

// base62Checksum writes n in base62, left-padded with zeros to checksumLen
// digits, as encode does.
func base62Checksum(n uint32) string {
	var out [checksumLen]byte
	for i := checksumLen - 1; i >= 0; i-- {
		out[i] = alphabet[n%62]
		n /= 62
	}
	return string(out[:])
}

// encode writes n in base62, left-padded with zeros to width digits.
func encode(n *big.Int, width int) string {
	out := make([]byte, width)
	base, mod := big.NewInt(62), new(big.Int)
	for i := width - 1; i >= 0; i-- {
		n.DivMod(n, base, mod)
		out[i] = alphabet[mod.Int64()]
	}
	return string(out)
}
