package mtls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

func TestParseOwner(t *testing.T) {
	tests := []struct {
		in      string
		want    Owner
		wantErr string // substring; "" means success
	}{
		{"user:alice", Owner{OwnerUser, "alice"}, ""},
		{"team:infra", Owner{OwnerTeam, "infra"}, ""},
		{"user:alice@example.com", Owner{OwnerUser, "alice@example.com"}, ""},
		{"team:A-z_0.9", Owner{OwnerTeam, "A-z_0.9"}, ""},
		{"user:" + strings.Repeat("a", 64), Owner{OwnerUser, strings.Repeat("a", 64)}, ""},
		{"user:" + strings.Repeat("a", 65), Owner{}, "1 to 64 characters"},
		{"alice", Owner{}, "want user:NAME or team:NAME"},
		{"", Owner{}, "want user:NAME or team:NAME"},
		{"user:", Owner{}, "1 to 64 characters"},
		{"group:x", Owner{}, `kind "group"`},
		{"User:alice", Owner{}, `kind "User"`},
		{"user:a/b", Owner{}, "1 to 64 characters"},
		{"user:a:b", Owner{}, "1 to 64 characters"},
		{"user:with space", Owner{}, "1 to 64 characters"},
		{"user:naïve", Owner{}, "1 to 64 characters"},
		{"user:a\n", Owner{}, "1 to 64 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseOwner(tt.in)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalidOwner) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseOwner(%q) err = %v, want ErrInvalidOwner containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseOwner(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
			if got.String() != tt.in {
				t.Errorf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}

// TestOwnerURIRoundTrip checks that every valid owner survives the trip
// through a URI SAN as x509 writes and parses it.
func TestOwnerURIRoundTrip(t *testing.T) {
	for _, o := range []Owner{{OwnerUser, "alice"}, {OwnerTeam, "infra"}, {OwnerUser, "a.b_c-d@e.f"}} {
		u := OwnerURI(o)
		back := mustURL(t, u.String())
		if got, err := ownerFromURI(back); err != nil || got != o {
			t.Errorf("%s: ownerFromURI = %+v, %v; want %+v", u, got, err, o)
		}
	}
	if got := OwnerURI(Owner{OwnerTeam, "infra"}).String(); got != "betcode://owner/team/infra" {
		t.Errorf("OwnerURI = %s", got)
	}
}

func TestMachineOwner(t *testing.T) {
	cert := func(uris ...string) *x509.Certificate {
		c := &x509.Certificate{Subject: pkix.Name{CommonName: "cn"}}
		for _, u := range uris {
			c.URIs = append(c.URIs, mustURL(t, u))
		}
		return c
	}
	verified := func(c *x509.Certificate) tls.ConnectionState {
		return tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}, VerifiedChains: [][]*x509.Certificate{{c}}}
	}
	const m = "betcode://machine/m1"
	tests := []struct {
		name    string
		state   tls.ConnectionState
		want    Owner
		wantOK  bool
		wantErr string // substring; "" means no error
	}{
		{"user", verified(cert(m, "betcode://owner/user/alice")), Owner{OwnerUser, "alice"}, true, ""},
		{"team", verified(cert("betcode://owner/team/infra", m)), Owner{OwnerTeam, "infra"}, true, ""},
		{"no owner", verified(cert(m)), Owner{}, false, ""},
		{"other URIs only", verified(cert(m, "spiffe://example.org/owner/user/x")), Owner{}, false, ""},
		{"no certificate", tls.ConnectionState{}, Owner{}, false, "no client certificate"},
		{"unverified", tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert(m, "betcode://owner/user/alice")}}, Owner{}, false, "presented but not verified"},
		{"owner without machine", verified(cert("betcode://owner/user/alice")), Owner{}, false, "not a machine certificate"},
		{"two owners", verified(cert(m, "betcode://owner/user/alice", "betcode://owner/team/infra")), Owner{}, false, "names 2 owners"},
		{"unknown kind", verified(cert(m, "betcode://owner/group/x")), Owner{}, false, `kind "group"`},
		{"no name", verified(cert(m, "betcode://owner/user/")), Owner{}, false, "1 to 64 characters"},
		{"no kind", verified(cert(m, "betcode://owner/")), Owner{}, false, "malformed owner URI"},
		{"extra segment", verified(cert(m, "betcode://owner/user/a/b")), Owner{}, false, "1 to 64 characters"},
		{"escaped", verified(cert(m, "betcode://owner/user/%61lice")), Owner{}, false, "malformed owner URI"},
		{"query", verified(cert(m, "betcode://owner/user/alice?x=1")), Owner{}, false, "malformed owner URI"},
		{"userinfo", verified(cert(m, "betcode://u@owner/user/alice")), Owner{}, false, "malformed owner URI"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := MachineOwner(tt.state)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("MachineOwner err = %v, want it to contain %q", err, tt.wantErr)
				}
				if ok || got != (Owner{}) {
					t.Errorf("MachineOwner = %+v, %v with an error", got, ok)
				}
				return
			}
			if err != nil || ok != tt.wantOK || got != tt.want {
				t.Fatalf("MachineOwner = %+v, %v, %v; want %+v, %v", got, ok, err, tt.want, tt.wantOK)
			}
		})
	}
}

func TestMachineOwnerFromPeer(t *testing.T) {
	if _, _, err := MachineOwnerFromPeer(context.Background()); err == nil || !strings.Contains(err.Error(), "no gRPC peer") {
		t.Errorf("no peer: err = %v", err)
	}
	plain := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{}})
	if _, _, err := MachineOwnerFromPeer(plain); !errors.Is(err, ErrNotTLS) {
		t.Errorf("plaintext peer: err = %v, want ErrNotTLS", err)
	}
	c := &x509.Certificate{Subject: pkix.Name{CommonName: "m1"}}
	c.URIs = append(c.URIs, MachineURI("m1"), OwnerURI(Owner{OwnerTeam, "infra"}))
	state := tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}, VerifiedChains: [][]*x509.Certificate{{c}}}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{}, AuthInfo: credentials.TLSInfo{State: state}})
	if o, ok, err := MachineOwnerFromPeer(ctx); err != nil || !ok || o != (Owner{OwnerTeam, "infra"}) {
		t.Errorf("MachineOwnerFromPeer = %+v, %v, %v; want team:infra", o, ok, err)
	}
}
