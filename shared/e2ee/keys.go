package e2ee

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/flynn/noise"
)

// KeyLen is the length of an X25519 private or public key.
const KeyLen = 32

// KeyPair is a static X25519 key pair: a machine's, or a device's.
type KeyPair struct {
	Private, Public []byte // KeyLen bytes each
}

// GenerateKey returns a new random key pair.
func GenerateKey() (KeyPair, error) {
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("generate X25519 key: %w", err)
	}
	return KeyPair{Private: k.Bytes(), Public: k.PublicKey().Bytes()}, nil
}

// keyPairFromPrivate derives the public half of priv.
func keyPairFromPrivate(priv []byte) (KeyPair, error) {
	k, err := ecdh.X25519().NewPrivateKey(priv)
	if err != nil {
		return KeyPair{}, fmt.Errorf("X25519 private key: %w", err)
	}
	return KeyPair{Private: k.Bytes(), Public: k.PublicKey().Bytes()}, nil
}

// check reports a key pair that Noise cannot use.
func (k KeyPair) check() error {
	if len(k.Private) != KeyLen || len(k.Public) != KeyLen {
		return fmt.Errorf("key pair has %d- and %d-byte halves, not %d", len(k.Private), len(k.Public), KeyLen)
	}
	return nil
}

// dh is k as the noise package holds it.
func (k KeyPair) dh() noise.DHKey {
	return noise.DHKey{Private: k.Private, Public: k.Public}
}

// keyPEMType names the one PEM block of a key file.
const keyPEMType = "BETCODE X25519 PRIVATE KEY"

// maxKeyFile bounds what LoadOrCreateKey reads: a key file is about 120 bytes.
const maxKeyFile = 4096

// LoadOrCreateKey returns the key pair whose private key the file at path
// holds, creating the file (mode 0600, its directory 0700) with a new key if
// it does not exist. The file is a PEM block of type "BETCODE X25519 PRIVATE
// KEY" holding the 32 bytes of the private key. A file that group or others
// may access, or that holds anything else, is refused with an error that
// says how to mend it: a key others could read is no longer the machine's
// alone.
func LoadOrCreateKey(path string) (KeyPair, error) {
	k, err := loadKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	return createKey(path)
}

// loadKey reads the key file at path; its error wraps fs.ErrNotExist when
// there is none.
func loadKey(path string) (KeyPair, error) {
	f, err := os.Open(path)
	if err != nil {
		return KeyPair{}, fmt.Errorf("open key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return KeyPair{}, fmt.Errorf("key file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return KeyPair{}, fmt.Errorf("key file %s is not a regular file (%s)", path, fi.Mode().Type())
	}
	// Windows has no such permission bits; its ACLs are the directory's.
	if perm := fi.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return KeyPair{}, fmt.Errorf("key file %s has mode %04o: group or others may access the private key; "+
			"run chmod 600 %s (and if anyone else could read it, treat the key as leaked: remove the file and pair again)",
			path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return KeyPair{}, fmt.Errorf("read key file %s: %w", path, err)
	}
	if len(data) > maxKeyFile {
		return KeyPair{}, fmt.Errorf("key file %s is over %d bytes: it is not a BetCode key", path, maxKeyFile)
	}
	k, err := parseKeyFile(data)
	if err != nil {
		return KeyPair{}, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}

// parseKeyFile decodes a key file's contents, strictly.
func parseKeyFile(data []byte) (KeyPair, error) {
	block, rest := pem.Decode(data)
	switch {
	case block == nil:
		return KeyPair{}, fmt.Errorf("no PEM block %q in it", keyPEMType)
	case block.Type != keyPEMType:
		return KeyPair{}, fmt.Errorf("it holds a %q PEM block, not %q", block.Type, keyPEMType)
	case len(block.Headers) != 0:
		return KeyPair{}, errors.New("its PEM block has headers; a BetCode key has none")
	case len(block.Bytes) != KeyLen:
		return KeyPair{}, fmt.Errorf("its key is %d bytes, not %d", len(block.Bytes), KeyLen)
	case len(bytes.TrimSpace(rest)) != 0:
		return KeyPair{}, errors.New("it has more after its PEM block")
	}
	return keyPairFromPrivate(block.Bytes)
}

// createKey writes a new key to path, atomically: a reader never sees half
// a file. If another process created the file first, its key wins.
func createKey(path string) (KeyPair, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return KeyPair{}, fmt.Errorf("create key directory: %w", err)
	}
	k, err := GenerateKey()
	if err != nil {
		return KeyPair{}, err
	}
	tmp, err := os.CreateTemp(dir, ".betcode-key-*") // mode 0600
	if err != nil {
		return KeyPair{}, fmt.Errorf("create key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	data := pem.EncodeToMemory(&pem.Block{Type: keyPEMType, Bytes: k.Private})
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return KeyPair{}, fmt.Errorf("write key file %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return KeyPair{}, fmt.Errorf("write key file %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return KeyPair{}, fmt.Errorf("write key file %s: %w", tmp.Name(), err)
	}
	// A link, unlike a rename, never replaces a key another process has
	// just created (and may already be using).
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return loadKey(path)
		}
		// Some file systems have no hard links.
		if err := os.Rename(tmp.Name(), path); err != nil {
			return KeyPair{}, fmt.Errorf("install key file: %w", err)
		}
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the new name durable; not every system can
		d.Close()
	}
	return k, nil
}

// Fingerprint is how people and records name a public key: the SHA-256 of
// pub in lower-case hex, in 16 groups of 4 separated by spaces
// ("ab12 cd34 …"), so that two can be compared by eye.
func Fingerprint(pub []byte) string {
	sum := sha256.Sum256(pub)
	return groupHex(hex.EncodeToString(sum[:]))
}

// groupHex groups hex characters in fours, separated by spaces.
func groupHex(h string) string {
	var b strings.Builder
	b.Grow(len(h) + len(h)/4)
	for i := 0; i < len(h); i += 4 {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(h[i:min(i+4, len(h))])
	}
	return b.String()
}

// FingerprintID is a stable short id of pub: the first 16 hex characters of
// its SHA-256 (64 bits), as device records and addresses show it.
func FingerprintID(pub []byte) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// ParseFingerprint returns the 32-byte hash that s names, in Fingerprint's
// grouped form or as 64 hex characters without spaces (either case).
func ParseFingerprint(s string) ([]byte, error) {
	h := strings.ReplaceAll(strings.TrimSpace(s), " ", "")
	if len(h) != 2*sha256.Size {
		return nil, fmt.Errorf("fingerprint %q has %d hex digits, not %d", s, len(h), 2*sha256.Size)
	}
	sum, err := hex.DecodeString(h)
	if err != nil {
		return nil, fmt.Errorf("fingerprint %q is not hex", s)
	}
	return sum, nil
}

// MatchesFingerprint reports whether pub is the key that fp names (in
// constant time). A malformed fp matches nothing.
func MatchesFingerprint(pub []byte, fp string) bool {
	want, err := ParseFingerprint(fp)
	if err != nil {
		return false
	}
	sum := sha256.Sum256(pub)
	return subtle.ConstantTimeCompare(sum[:], want) == 1
}

// fingerprintIDOf is the FingerprintID of the key that the fingerprint fp
// names.
func fingerprintIDOf(fp string) string {
	h := strings.ReplaceAll(fp, " ", "")
	if len(h) > 16 {
		h = h[:16]
	}
	return strings.ToLower(h)
}
