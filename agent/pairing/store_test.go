package pairing

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/shared/e2ee"
)

type closer struct{ closed bool }

func (c *closer) Close() error { c.closed = true; return nil }

var _ io.Closer = (*closer)(nil)

func TestStorePersistsDevices(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("machine key file: %v %v, want mode 0600", fi, err)
	}
	a, _ := e2ee.GenerateKey()
	b, _ := e2ee.GenerateKey()
	if _, err := s.Add(a.Public, "phone", "tok-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(b.Public, "laptop", "tok-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rename(e2ee.FingerprintID(b.Public), "work laptop"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authorize(a.Public); err != nil {
		t.Fatal(err)
	}
	c := &closer{}
	forget := s.Track(e2ee.FingerprintID(a.Public), c)
	defer forget()
	d, n, err := s.Revoke(e2ee.FingerprintID(a.Public)[:6]) // a prefix of the fingerprint
	if err != nil || n != 1 || !c.closed || !d.Revoked() {
		t.Fatalf("Revoke: %+v %d %v (closed %v)", d, n, err, c.closed)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	fi, err = os.Stat(filepath.Join(dir, DevicesFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("devices file: %v %v, want mode 0600", fi, err)
	}

	again, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(again.Key().Public) != string(s.Key().Public) {
		t.Fatal("the machine key changed across a restart")
	}
	list := again.List()
	if len(list) != 2 || list[0].Name != "phone" || !list[0].Revoked() || list[0].LastSeen.IsZero() ||
		list[1].Name != "work laptop" || list[1].RelayTokenID != "tok-b" {
		t.Fatalf("devices after a restart: %+v", list)
	}
	if _, err := again.Authorize(a.Public); !errors.Is(err, ErrRevoked) {
		t.Fatalf("a revoked device: %v", err)
	}
	stranger, _ := e2ee.GenerateKey()
	if _, err := again.Authorize(stranger.Public); !errors.Is(err, ErrNotPaired) {
		t.Fatalf("an unknown device: %v", err)
	}
	late := &closer{}
	again.Track(e2ee.FingerprintID(a.Public), late)
	if !late.closed {
		t.Fatal("a revoked device's new channel was not closed")
	}
}

func TestStoreRefusals(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k1, _ := e2ee.GenerateKey()
	s.Add(k1.Public, "one", "")
	for _, tc := range []struct {
		name string
		do   func() error
		want error
	}{
		{"rename unknown", func() error { _, err := s.Rename("ffff", "x"); return err }, ErrNoDevice},
		{"rename empty id", func() error { _, err := s.Rename(" ", "x"); return err }, ErrNoDevice},
		{"rename empty name", func() error { _, err := s.Rename(e2ee.FingerprintID(k1.Public), " "); return err }, ErrInvalidName},
		{"rename control chars", func() error { _, err := s.Rename(e2ee.FingerprintID(k1.Public), "a\x00b"); return err }, ErrInvalidName},
		{"revoke unknown", func() error { _, _, err := s.Revoke("nope"); return err }, ErrNoDevice},
		{"take unknown offer", func() error { _, err := s.Take("0011"); return err }, ErrNoOffer},
	} {
		if err := tc.do(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestOffers(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s.now = func() time.Time { return now }
	o, err := s.NewOffer()
	if err != nil || len(o.Secret) < 16 {
		t.Fatalf("NewOffer: %+v %v", o, err)
	}
	got, err := s.Take(o.ID)
	if err != nil || got != o {
		t.Fatalf("Take: %v", err)
	}
	if _, err := s.Take(o.ID); !errors.Is(err, ErrNoOffer) {
		t.Fatalf("a second Take of one offer: %v", err)
	}
	for range maxOffers {
		if _, err := s.NewOffer(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.NewOffer(); !errors.Is(err, ErrOfferLimit) {
		t.Fatalf("offer over the limit: %v", err)
	}
	// Expired offers leave room and cannot be taken; their waiters learn.
	now = now.Add(OfferTTL + time.Second)
	late, err := s.NewOffer()
	if err != nil {
		t.Fatalf("an offer after the others expired: %v", err)
	}
	s.Withdraw(late)
	if _, ok := <-late.Paired; ok {
		t.Fatal("a withdrawn offer reported a device")
	}
}
