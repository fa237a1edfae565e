package pushtest

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"
)

// capture is a webpush.HTTPClient that keeps the request instead of
// sending it.
type capture struct {
	req  *http.Request
	body []byte
}

func (c *capture) Do(r *http.Request) (*http.Response, error) {
	c.req = r
	c.body, _ = io.ReadAll(r.Body)
	return &http.Response{StatusCode: http.StatusCreated, Body: io.NopCloser(strings.NewReader(""))}, nil
}

// encrypt sends msg with webpush-go (the relay's sender) to a subscription
// of a fresh user agent key and returns what it would have POSTed.
func encrypt(t *testing.T, msg []byte, recordSize uint32, endpoint, subject string) (*capture, *ecdh.PrivateKey, []byte, string) {
	t.Helper()
	ua, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	rand.Read(auth)
	priv, pub, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	c := &capture{}
	sub := &webpush.Subscription{Endpoint: endpoint, Keys: webpush.Keys{
		P256dh: base64.RawURLEncoding.EncodeToString(ua.PublicKey().Bytes()), Auth: base64.RawURLEncoding.EncodeToString(auth),
	}}
	resp, err := webpush.SendNotification(bytes.Clone(msg), sub, &webpush.Options{
		HTTPClient: c, RecordSize: recordSize, Subscriber: subject, TTL: 60, VAPIDPublicKey: pub, VAPIDPrivateKey: priv,
	})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return c, ua, auth, pub
}

func TestDecrypt(t *testing.T) {
	tests := []struct {
		name       string
		msg        []byte
		recordSize uint32
	}{
		{"json payload", []byte(`{"type":"permission_request","requestId":"r1"}`), 0},
		{"empty", nil, 0},
		{"trailing zero bytes kept", []byte("a\x00\x00"), 0},
		{"small record size", []byte(`{"title":"hello"}`), 128},
		{"near the limit", bytes.Repeat([]byte("x"), 3900), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ua, auth, _ := encrypt(t, tt.msg, tt.recordSize, "https://push.example/x", "ops@example.com")
			got, err := Decrypt(c.body, ua, auth)
			if err != nil || !bytes.Equal(got, tt.msg) {
				t.Errorf("Decrypt = %q, %v; want %q", got, err, tt.msg)
			}
		})
	}

	c, ua, auth, _ := encrypt(t, []byte("secret"), 0, "https://push.example/x", "ops@example.com")
	other, _ := ecdh.P256().GenerateKey(rand.Reader)
	flip := bytes.Clone(c.body)
	flip[len(flip)-1] ^= 1
	bad := []struct {
		name string
		body []byte
		ua   *ecdh.PrivateKey
		auth []byte
	}{
		{"short header", c.body[:20], ua, auth},
		{"no records", c.body[:21+65], ua, auth},
		{"bad key id", append(append(bytes.Clone(c.body[:21]), make([]byte, 65)...), c.body[86:]...), ua, auth},
		{"wrong auth secret", c.body, ua, make([]byte, 16)},
		{"wrong user agent key", c.body, other, auth},
		{"tampered ciphertext", flip, ua, auth},
	}
	for _, b := range bad {
		if got, err := Decrypt(b.body, b.ua, b.auth); err == nil {
			t.Errorf("Decrypt(%s) = %q; want an error", b.name, got)
		}
	}
}

func TestVerifyVAPID(t *testing.T) {
	const endpoint = "https://push.example:8443/push/abc"
	c, _, _, pub := encrypt(t, []byte("x"), 0, endpoint, "ops@example.com")
	good := c.req.Header.Get("Authorization")
	now := time.Now()
	_, _, _, otherPub := encrypt(t, []byte("x"), 0, endpoint, "ops@example.com")
	tok, _, _ := strings.Cut(strings.TrimPrefix(good, "vapid t="), ",")
	tests := []struct {
		name, header, endpoint string
		now                    time.Time
		ok                     bool
	}{
		{"valid", good, endpoint, now, true},
		{"other path, same origin", good, "https://push.example:8443/other", now, true},
		{"other origin", good, "https://push.example/push/abc", now, false},
		{"expired", good, endpoint, now.Add(13 * time.Hour), false},
		{"not vapid scheme", strings.Replace(good, "vapid", "WebPush", 1), endpoint, now, false},
		{"another key", "vapid t=" + tok + ", k=" + otherPub, endpoint, now, false},
		{"no key", "vapid t=" + tok, endpoint, now, false},
		{"tampered claims", "vapid t=" + strings.Replace(tok, ".", ".x", 1) + ", k=" + pub, endpoint, now, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := VerifyVAPID(tt.header, tt.endpoint, tt.now)
			if (err == nil) != tt.ok {
				t.Fatalf("VerifyVAPID = %+v, %v; want ok=%v", v, err, tt.ok)
			}
			if tt.ok && (v.PublicKey != pub || v.Subject != "mailto:ops@example.com") {
				t.Errorf("VerifyVAPID = %+v; want key %s, subject mailto:ops@example.com", v, pub)
			}
		})
	}
}
