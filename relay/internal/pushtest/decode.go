// Package pushtest is a loopback Web Push service for tests: it plays the
// browser vendor's push service (RFC 8030) and the browser behind it. It
// makes subscriptions (a P-256 key pair and a 16-byte auth secret, as a
// browser does), accepts the relay's POSTs, checks their VAPID
// authorization (RFC 8292) and decrypts their aes128gcm bodies (RFC 8291
// over RFC 8188) by hand, from the RFCs rather than from the sending
// library, and hands the plaintext to the test. It can answer a status of
// the test's choosing (410 Gone, to test expiry).
package pushtest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"time"
)

// Decrypt decrypts an RFC 8291 aes128gcm message body for the user agent
// whose key is ua and whose auth secret is auth.
//
// The body is the RFC 8188 header (salt 16 | record size 4 | key id length
// 1 | key id, here the sender's ephemeral P-256 public key) followed by
// records of at most rs bytes, each AES-128-GCM sealed with the nonce XOR
// its index; a record's plaintext ends with a delimiter (2 on the last, 1
// on the others) and zero padding.
func Decrypt(body []byte, ua *ecdh.PrivateKey, auth []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("aes128gcm: body shorter than its header")
	}
	salt, rs, idLen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if rs < 18 {
		return nil, fmt.Errorf("aes128gcm: record size %d below 18", rs)
	}
	if len(body) < 21+idLen {
		return nil, errors.New("aes128gcm: body shorter than its key id")
	}
	asPub, err := ecdh.P256().NewPublicKey(body[21 : 21+idLen])
	if err != nil {
		return nil, fmt.Errorf("aes128gcm: key id is not a P-256 public key: %w", err)
	}
	records := body[21+idLen:]
	if len(records) == 0 {
		return nil, errors.New("aes128gcm: no records")
	}

	// RFC 8291 section 3.4: the input keying material from ECDH and the
	// auth secret, then RFC 8188 section 2.2-2.3: key and nonce.
	shared, err := ua.ECDH(asPub)
	if err != nil {
		return nil, fmt.Errorf("aes128gcm: ecdh: %w", err)
	}
	prkKey, err := hkdf.Extract(sha256.New, shared, auth)
	if err != nil {
		return nil, err
	}
	keyInfo := "WebPush: info\x00" + string(ua.PublicKey().Bytes()) + string(asPub.Bytes())
	ikm, err := hkdf.Expand(sha256.New, prkKey, keyInfo, 32)
	if err != nil {
		return nil, err
	}
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	baseNonce, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}

	var out []byte
	for seq := uint64(0); len(records) > 0; seq++ {
		n := min(int(rs), len(records))
		rec := records[:n]
		records = records[n:]
		nonce := bytes.Clone(baseNonce)
		for i := range 8 {
			nonce[11-i] ^= byte(seq >> (8 * i))
		}
		plain, err := gcm.Open(nil, nonce, rec, nil)
		if err != nil {
			return nil, fmt.Errorf("aes128gcm: record %d: %w", seq, err)
		}
		end := bytes.TrimRight(plain, "\x00")
		if len(end) == 0 {
			return nil, fmt.Errorf("aes128gcm: record %d has no delimiter", seq)
		}
		last := len(records) == 0
		switch d := end[len(end)-1]; {
		case last && d != 2:
			return nil, fmt.Errorf("aes128gcm: last record %d ends with delimiter %d, want 2", seq, d)
		case !last && d != 1:
			return nil, fmt.Errorf("aes128gcm: record %d ends with delimiter %d, want 1", seq, d)
		}
		out = append(out, end[:len(end)-1]...)
	}
	return out, nil
}

// VAPID is a verified RFC 8292 authorization.
type VAPID struct {
	// PublicKey is the k= parameter, base64url (the application server
	// key the browser subscribed with).
	PublicKey string
	// Subject is the JWT's sub claim (mailto: or https: contact).
	Subject string
	// Expires is the JWT's exp claim.
	Expires time.Time
}

// VerifyVAPID checks an Authorization header of the form
// `vapid t=<JWT>, k=<public key>` for a message to endpoint at now: an
// ES256 JWT signed by k, whose aud is the endpoint's origin, whose exp is in
// the future but at most 24 hours away, and whose sub is a mailto: or
// https: URL.
func VerifyVAPID(header, endpoint string, now time.Time) (VAPID, error) {
	scheme, params, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "vapid") {
		return VAPID{}, fmt.Errorf("vapid: authorization scheme %q, want vapid", scheme)
	}
	var tok, k string
	for p := range strings.SplitSeq(params, ",") {
		name, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		switch name {
		case "t":
			tok = v
		case "k":
			k = v
		}
	}
	if tok == "" || k == "" {
		return VAPID{}, errors.New("vapid: t= and k= are both required")
	}
	rawKey, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(k, "="))
	if err != nil {
		return VAPID{}, fmt.Errorf("vapid: k= is not base64url: %w", err)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), rawKey)
	if err != nil {
		return VAPID{}, fmt.Errorf("vapid: k= is not an uncompressed P-256 point: %w", err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return VAPID{}, fmt.Errorf("vapid: JWT has %d parts, want 3", len(parts))
	}
	var hdr struct{ Alg, Typ string }
	if err := decodeJSON(parts[0], &hdr); err != nil {
		return VAPID{}, fmt.Errorf("vapid: JWT header: %w", err)
	}
	if hdr.Alg != "ES256" {
		return VAPID{}, fmt.Errorf("vapid: JWT alg %q, want ES256", hdr.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return VAPID{}, errors.New("vapid: JWT signature is not 64 bytes of base64url (r || s)")
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	if !ecdsa.Verify(pub, digest[:], r, s) {
		return VAPID{}, errors.New("vapid: JWT signature does not verify against k=")
	}
	var claims struct {
		Aud string `json:"aud"`
		Exp int64  `json:"exp"`
		Sub string `json:"sub"`
	}
	if err := decodeJSON(parts[1], &claims); err != nil {
		return VAPID{}, fmt.Errorf("vapid: JWT claims: %w", err)
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return VAPID{}, fmt.Errorf("vapid: endpoint: %w", err)
	}
	if origin := u.Scheme + "://" + u.Host; claims.Aud != origin {
		return VAPID{}, fmt.Errorf("vapid: aud %q, want the endpoint's origin %q", claims.Aud, origin)
	}
	exp := time.Unix(claims.Exp, 0)
	if !exp.After(now) || exp.Sub(now) > 24*time.Hour {
		return VAPID{}, fmt.Errorf("vapid: exp %v is not within 24h after %v", exp, now)
	}
	if !strings.HasPrefix(claims.Sub, "mailto:") && !strings.HasPrefix(claims.Sub, "https:") {
		return VAPID{}, fmt.Errorf("vapid: sub %q is not a mailto: or https: URL", claims.Sub)
	}
	if strings.HasPrefix(claims.Sub, "mailto:mailto:") {
		return VAPID{}, fmt.Errorf("vapid: sub %q repeats its scheme", claims.Sub)
	}
	return VAPID{PublicKey: base64.RawURLEncoding.EncodeToString(rawKey), Subject: claims.Sub, Expires: exp}, nil
}

func decodeJSON(part string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
