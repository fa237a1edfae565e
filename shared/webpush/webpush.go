// Package webpush encrypts a Web Push message for a browser's push
// subscription: RFC 8291 (message encryption for Web Push) over RFC 8188's
// aes128gcm content coding, in one record. It is a standard composition of
// ECDH P-256, HKDF-SHA-256 and AES-128-GCM, written from the RFCs on the
// standard library (webpush-go exports no encrypt function of its own).
//
// The machine encrypts each notification with it, so that the relay only
// carries the opaque body to the push service (docs/e2ee-wire.md, "Push,
// encrypted by the machine").
package webpush

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// RecordSize is the RFC 8188 record size written in the header: a push
// message is at most 4096 bytes, so one record always holds it.
const RecordSize = 4096

// MaxPlaintext is the longest plaintext Encrypt takes: a 4096-byte body
// less the header (86 bytes), the delimiter (1) and the AES-GCM tag (16).
const MaxPlaintext = RecordSize - 86 - 1 - 16

// ErrTooLarge is returned for a plaintext over MaxPlaintext.
var ErrTooLarge = errors.New("webpush: plaintext over the 4096-byte push message limit")

// Subscription is what a browser's PushSubscription.toJSON() gives: the
// push service's endpoint and the user agent's keys (base64url, padded or
// not; standard base64 is accepted too, as some browsers send it).
type Subscription struct {
	Endpoint string
	// P256dh is the user agent's uncompressed P-256 public key.
	P256dh string
	// Auth is the 16-byte authentication secret.
	Auth string
}

// Keys decodes and checks the subscription's keys.
func (s Subscription) Keys() (*ecdh.PublicKey, []byte, error) {
	raw, err := DecodeKey(s.P256dh)
	if err != nil {
		return nil, nil, fmt.Errorf("webpush: p256dh: %w", err)
	}
	ua, err := ecdh.P256().NewPublicKey(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("webpush: p256dh is not a P-256 public key: %w", err)
	}
	auth, err := DecodeKey(s.Auth)
	if err != nil {
		return nil, nil, fmt.Errorf("webpush: auth: %w", err)
	}
	if len(auth) != 16 {
		return nil, nil, fmt.Errorf("webpush: auth is %d bytes, want 16", len(auth))
	}
	return ua, auth, nil
}

// DecodeKey decodes a browser key: base64url, with or without padding, or
// standard base64.
func DecodeKey(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if b, err := base64.RawURLEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// Encrypt returns the aes128gcm body (RFC 8188 header, then one record) of
// a push message carrying plaintext to sub's user agent, with a fresh
// ephemeral key and salt.
func Encrypt(sub Subscription, plaintext []byte) ([]byte, error) {
	ua, auth, err := sub.Keys()
	if err != nil {
		return nil, err
	}
	as, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("webpush: ephemeral key: %w", err)
	}
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return nil, fmt.Errorf("webpush: salt: %w", err)
	}
	return encrypt(ua, auth, plaintext, as, salt)
}

// encrypt is Encrypt with the application server's ephemeral key as and
// the salt given (RFC 8291 Appendix A's vector fixes both).
func encrypt(ua *ecdh.PublicKey, auth, plaintext []byte, as *ecdh.PrivateKey, salt []byte) ([]byte, error) {
	if len(plaintext) > MaxPlaintext {
		return nil, ErrTooLarge
	}
	gcm, nonce, err := keys(ua, as.PublicKey(), auth, salt, func() ([]byte, error) { return as.ECDH(ua) })
	if err != nil {
		return nil, err
	}
	asPub := as.PublicKey().Bytes()
	body := make([]byte, 0, 21+len(asPub)+len(plaintext)+1+gcm.Overhead())
	body = append(body, salt...)
	body = binary.BigEndian.AppendUint32(body, RecordSize)
	body = append(body, byte(len(asPub)))
	body = append(body, asPub...)
	// One record, the last: the plaintext, delimiter 2, no padding.
	record := append(bytes.Clone(plaintext), 2)
	return gcm.Seal(body, nonce, record, nil), nil
}

// keys derives the content-encryption AEAD and the first record's nonce
// (RFC 8291 section 3.4, RFC 8188 section 2.2-2.3).
func keys(ua, as *ecdh.PublicKey, auth, salt []byte, shared func() ([]byte, error)) (cipher.AEAD, []byte, error) {
	ecdhSecret, err := shared()
	if err != nil {
		return nil, nil, fmt.Errorf("webpush: ecdh: %w", err)
	}
	prkKey, err := hkdf.Extract(sha256.New, ecdhSecret, auth)
	if err != nil {
		return nil, nil, err
	}
	info := "WebPush: info\x00" + string(ua.Bytes()) + string(as.Bytes())
	ikm, err := hkdf.Expand(sha256.New, prkKey, info, 32)
	if err != nil {
		return nil, nil, err
	}
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, nil, err
	}
	cek, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, nil, err
	}
	nonce, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, nil, err
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, nil, err
	}
	return gcm, nonce, nil
}

// Decrypt opens a one-record aes128gcm body for the user agent whose key
// is ua and whose auth secret is auth: what a browser does. BetCode's
// product never needs it; tests and debugging tools do.
func Decrypt(body []byte, ua *ecdh.PrivateKey, auth []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("webpush: body shorter than its header")
	}
	salt, rs, idLen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if len(body) < 21+idLen {
		return nil, errors.New("webpush: body shorter than its key id")
	}
	as, err := ecdh.P256().NewPublicKey(body[21 : 21+idLen])
	if err != nil {
		return nil, fmt.Errorf("webpush: key id is not a P-256 public key: %w", err)
	}
	record := body[21+idLen:]
	if uint32(len(record)) > rs {
		return nil, errors.New("webpush: more than one record")
	}
	gcm, nonce, err := keys(ua.PublicKey(), as, auth, salt, func() ([]byte, error) { return ua.ECDH(as) })
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, nonce, record, nil)
	if err != nil {
		return nil, fmt.Errorf("webpush: open the record: %w", err)
	}
	plain = bytes.TrimRight(plain, "\x00")
	if len(plain) == 0 || plain[len(plain)-1] != 2 {
		return nil, errors.New("webpush: the record does not end with the last record's delimiter")
	}
	return plain[:len(plain)-1], nil
}
