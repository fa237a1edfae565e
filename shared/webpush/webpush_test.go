package webpush

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"testing"
)

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRFC8291Vector reproduces RFC 8291 Appendix A byte for byte.
func TestRFC8291Vector(t *testing.T) {
	const (
		plaintext = "When I grow up, I want to be a watermelon"
		asPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
		uaPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
		uaPublic  = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
		salt      = "DGv6ra1nlYgDCS1FRnbzlw"
		auth      = "BTBZMqHH6r4Tts7J_aSIgg"
		want      = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
	)
	as, err := ecdh.P256().NewPrivateKey(b64(t, asPrivate))
	if err != nil {
		t.Fatal(err)
	}
	ua, auth1, err := Subscription{P256dh: uaPublic, Auth: auth}.Keys()
	if err != nil {
		t.Fatal(err)
	}
	body, err := encrypt(ua, auth1, []byte(plaintext), as, b64(t, salt))
	if err != nil {
		t.Fatal(err)
	}
	if got := base64.RawURLEncoding.EncodeToString(body); got != want {
		t.Fatalf("body\n got %s\nwant %s", got, want)
	}
	uaKey, err := ecdh.P256().NewPrivateKey(b64(t, uaPrivate))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Decrypt(b64(t, want), uaKey, auth1)
	if err != nil || string(plain) != plaintext {
		t.Fatalf("Decrypt = %q, %v", plain, err)
	}
}

func TestEncryptRoundTrip(t *testing.T) {
	ua, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	rand.Read(auth)
	sub := Subscription{Endpoint: "https://push.example/x",
		P256dh: base64.RawURLEncoding.EncodeToString(ua.PublicKey().Bytes()),
		Auth:   base64.StdEncoding.EncodeToString(auth)} // padded standard base64, as some browsers send
	for _, tc := range []struct {
		name string
		n    int
		err  error
	}{{"empty", 0, nil}, {"small", 100, nil}, {"largest", MaxPlaintext, nil}, {"too large", MaxPlaintext + 1, ErrTooLarge}} {
		t.Run(tc.name, func(t *testing.T) {
			msg := bytes.Repeat([]byte{'x'}, tc.n)
			body, err := Encrypt(sub, msg)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Encrypt: %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if len(body) > RecordSize {
				t.Fatalf("body is %d bytes, over %d", len(body), RecordSize)
			}
			got, err := Decrypt(body, ua, auth)
			if err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("Decrypt = %d bytes, %v", len(got), err)
			}
			other, _ := Encrypt(sub, msg)
			if bytes.Equal(body, other) {
				t.Fatal("two encryptions are equal: the ephemeral key or salt is not fresh")
			}
		})
	}
}

func TestKeysRefused(t *testing.T) {
	for _, tc := range []struct{ name, p256dh, auth string }{
		{"not base64", "!!", "BTBZMqHH6r4Tts7J_aSIgg"},
		{"not a point", base64.RawURLEncoding.EncodeToString(make([]byte, 65)), "BTBZMqHH6r4Tts7J_aSIgg"},
		{"short auth", "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", "BTBZ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Encrypt(Subscription{P256dh: tc.p256dh, Auth: tc.auth}, []byte("x")); err == nil {
				t.Fatal("Encrypt accepted bad keys")
			}
		})
	}
}
