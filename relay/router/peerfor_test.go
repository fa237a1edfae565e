package router

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/peer"
	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/store"
)

func TestPeerFor(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.Init(dir, []string{"localhost"}, pki.Options{}); err != nil {
		t.Fatal(err)
	}
	fw, err := peer.New(filepath.Join(dir, pki.RelayCertFile), filepath.Join(dir, pki.RelayKeyFile), filepath.Join(dir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	const self, other = "10.0.0.1:8443", "10.0.0.2:8443"
	now := time.Now()
	client := auth.Identity{UserID: "local"}
	tests := []struct {
		name string
		rt   *Router
		m    store.Machine
		id   auth.Identity
		want string
	}{
		{"held by a live peer", &Router{Self: self, Peers: fw, PresenceTTL: 3 * time.Second}, store.Machine{Replica: other, LastSeen: now}, client, other},
		{"peer record stale (crashed replica)", &Router{Self: self, Peers: fw, PresenceTTL: 3 * time.Second}, store.Machine{Replica: other, LastSeen: now.Add(-4 * time.Second)}, client, ""},
		{"no replica recorded", &Router{Self: self, Peers: fw, PresenceTTL: 3 * time.Second}, store.Machine{LastSeen: now}, client, ""},
		{"record names this replica", &Router{Self: self, Peers: fw, PresenceTTL: 3 * time.Second}, store.Machine{Replica: self, LastSeen: now}, client, ""},
		{"already forwarded once", &Router{Self: self, Peers: fw, PresenceTTL: 3 * time.Second}, store.Machine{Replica: other, LastSeen: now}, auth.Identity{UserID: "local", ForwardedBy: other}, ""},
		{"single replica", &Router{PresenceTTL: 3 * time.Second}, store.Machine{Replica: other, LastSeen: now}, client, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rt.peerFor(&tt.m, tt.id); got != tt.want {
				t.Errorf("peerFor = %q; want %q", got, tt.want)
			}
		})
	}
}
