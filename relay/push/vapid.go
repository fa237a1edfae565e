package push

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
)

// vapidLifetime is how long a VAPID token is valid (RFC 8292 allows up to
// 24 hours).
const vapidLifetime = 12 * time.Hour

// vapidAuthorization is the RFC 8292 Authorization header for a message to
// endpoint: `vapid t=<ES256 JWT>, k=<public key>`, the JWT's aud the
// endpoint's origin, sub the contact. webpush-go signs the same token, but
// only inside its own encrypting send; a machine's message arrives
// encrypted already.
func vapidAuthorization(key store.VAPIDKey, subject, endpoint string, now time.Time) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("vapid: endpoint is not an absolute URL")
	}
	raw, err := base64.RawURLEncoding.DecodeString(key.Private)
	if err != nil {
		return "", fmt.Errorf("vapid: private key: %w", err)
	}
	priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), raw)
	if err != nil {
		return "", fmt.Errorf("vapid: private key: %w", err)
	}
	header, err := json.Marshal(map[string]string{"typ": "JWT", "alg": "ES256"})
	if err != nil {
		return "", err
	}
	claims, err := json.Marshal(map[string]any{"aud": u.Scheme + "://" + u.Host, "exp": now.Add(vapidLifetime).Unix(), "sub": subject})
	if err != nil {
		return "", err
	}
	signing := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, priv, digest[:])
	if err != nil {
		return "", fmt.Errorf("vapid: sign: %w", err)
	}
	// JWS ES256 signatures are r || s, 32 bytes each (RFC 7518 section 3.4).
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return "vapid t=" + signing + "." + base64.RawURLEncoding.EncodeToString(sig) + ", k=" + key.Public, nil
}
