package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// The end-to-end test of `betcode login --oidc` runs against a real OpenID
// Provider (relay/e2e). These tests cover what that provider will not do on
// request — a code that expires, a token response without an ID token —
// with a device-flow endpoint that answers as RFC 8628 says.

// deviceIdP is the device flow's side of an identity provider: discovery,
// device authorization and a token endpoint whose answer is outcome (after
// an authorization_pending first, with pending).
type deviceIdP struct {
	*httptest.Server
	outcome map[string]any // the token endpoint's JSON once the person acted
	status  int            // its HTTP status (200 or 400)
	pending bool           // the first poll is answered authorization_pending
	onPoll  func()         // called on each poll, if set

	mu    sync.Mutex
	polls int
	forms []string // problems with the client's requests
}

func startDeviceIdP(t *testing.T, status int, outcome map[string]any, pending bool) *deviceIdP {
	t.Helper()
	p := &deviceIdP{outcome: outcome, status: status, pending: pending}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 200, map[string]any{
			"issuer": p.URL, "authorization_endpoint": p.URL + "/auth", "token_endpoint": p.URL + "/token",
			"device_authorization_endpoint": p.URL + "/device_authorization", "jwks_uri": p.URL + "/keys",
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("POST /device_authorization", func(w http.ResponseWriter, r *http.Request) {
		p.check(r, "")
		writeJSON(w, 200, map[string]any{"device_code": "dev-code", "user_code": "BCDF-GHJK", "verification_uri": p.URL + "/device",
			"verification_uri_complete": p.URL + "/device?user_code=BCDF-GHJK", "expires_in": 300, "interval": 1})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		p.check(r, "dev-code")
		p.mu.Lock()
		p.polls++
		first := p.polls == 1
		p.mu.Unlock()
		if p.onPoll != nil {
			p.onPoll()
		}
		if first && p.pending {
			writeJSON(w, 400, map[string]any{"error": "authorization_pending"})
			return
		}
		writeJSON(w, p.status, p.outcome)
	})
	p.Server = httptest.NewServer(mux)
	t.Cleanup(p.Close)
	return p
}

// check records what is wrong with a request of the public client.
func (p *deviceIdP) check(r *http.Request, deviceCode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := r.ParseForm(); err != nil {
		p.forms = append(p.forms, err.Error())
		return
	}
	if r.Header.Get("Authorization") != "" || r.PostForm.Has("client_secret") {
		p.forms = append(p.forms, r.URL.Path+": a public client sent credentials")
	}
	if r.PostForm.Get("client_id") != "betcode" {
		p.forms = append(p.forms, r.URL.Path+": client_id "+r.PostForm.Get("client_id"))
	}
	if deviceCode == "" && r.PostForm.Get("scope") != "openid email profile" {
		p.forms = append(p.forms, r.URL.Path+": scope "+r.PostForm.Get("scope"))
	}
	if deviceCode != "" && (r.PostForm.Get("device_code") != deviceCode || r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:device_code") {
		p.forms = append(p.forms, r.URL.Path+": "+r.PostForm.Encode())
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// oidcRelay is the relay's OIDCService: it names an identity provider and
// turns the ID token "id-of-alice" into alice's client token.
type oidcRelay struct {
	pb.UnimplementedOIDCServiceServer
	cfg   *pb.GetOIDCConfigResponse
	token string

	mu        sync.Mutex
	exchanged []string
}

func (o *oidcRelay) GetOIDCConfig(context.Context, *pb.GetOIDCConfigRequest) (*pb.GetOIDCConfigResponse, error) {
	return o.cfg, nil
}

func (o *oidcRelay) ExchangeOIDCToken(_ context.Context, req *pb.ExchangeOIDCTokenRequest) (*pb.ExchangeOIDCTokenResponse, error) {
	o.mu.Lock()
	o.exchanged = append(o.exchanged, req.GetIdToken())
	o.mu.Unlock()
	if req.GetIdToken() != "id-of-alice" {
		return nil, status.Error(codes.PermissionDenied, "no BetCode user has the email mallory@example.com")
	}
	return &pb.ExchangeOIDCTokenResponse{Token: o.token, UserId: "alice"}, nil
}

func TestLoginOIDC(t *testing.T) {
	success := map[string]any{"access_token": "at", "token_type": "Bearer", "expires_in": 3600, "id_token": "id-of-alice"}
	tests := []struct {
		name      string
		status    int
		outcome   map[string]any
		noOIDC    bool // the relay has OIDCService but no provider
		pending   bool // the person takes a while
		cancel    bool // Ctrl-C while waiting
		wantCode  int
		wantErr   string
		exchanged bool
	}{
		{name: "signed in", status: 200, outcome: success, pending: true, wantCode: client.ExitOK, exchanged: true},
		{name: "denied", status: 400, outcome: map[string]any{"error": "access_denied"}, wantCode: client.ExitPermission,
			wantErr: "the sign-in was denied at the identity provider"},
		{name: "expired", status: 400, outcome: map[string]any{"error": "expired_token"}, wantCode: client.ExitPermission,
			wantErr: "the code expired before the sign-in finished; run betcode login --oidc again"},
		{name: "no id_token", status: 200, outcome: map[string]any{"access_token": "at", "token_type": "Bearer"}, wantCode: client.ExitPermission,
			wantErr: `the identity provider returned no ID token (it must allow client "betcode" the openid scope)`},
		{name: "refused by the relay", status: 200, outcome: map[string]any{"access_token": "at", "token_type": "Bearer", "id_token": "id-of-mallory"},
			wantCode: client.ExitPermission, wantErr: "the relay refused the sign-in: no BetCode user has the email mallory@example.com", exchanged: true},
		{name: "relay without OIDC", noOIDC: true, wantCode: client.ExitInvalidArgs, wantErr: "this relay has no OIDC sign-in; log in with a token"},
		{name: "cancelled", status: 200, outcome: success, pending: true, cancel: true, wantCode: client.ExitPermission, wantErr: "sign-in cancelled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			configDir := cliEnv(t)
			idp := startDeviceIdP(t, tt.status, tt.outcome, tt.pending)
			tok := newToken(t)
			o := &oidcRelay{cfg: &pb.GetOIDCConfigResponse{Enabled: true, Issuer: idp.URL, ClientId: "betcode", Scopes: []string{"openid", "email", "profile"}}, token: tok}
			if tt.noOIDC {
				o.cfg = &pb.GetOIDCConfigResponse{}
			}
			relay := startRelayWith(t, map[string]string{tok: "alice"}, func(s *grpc.Server) { pb.RegisterOIDCServiceServer(s, o) })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if tt.cancel {
				idp.onPoll = cancel // the person presses Ctrl-C while betcode waits
			}
			out, errOut, err := runCLIContext(ctx, "", "login", "--oidc", "--relay", relay.addr, "--relay-ca", relay.caFile)
			if client.ExitCode(err) != tt.wantCode || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("login --oidc: exit %d, %v; want %d and %q\nstderr: %s", client.ExitCode(err), err, tt.wantCode, tt.wantErr, errOut)
			}
			idp.mu.Lock()
			problems := idp.forms
			idp.mu.Unlock()
			if len(problems) > 0 {
				t.Fatalf("the client's requests: %q", problems)
			}
			if !tt.noOIDC && !strings.Contains(errOut, "To sign in, open "+idp.URL+"/device and enter code BCDF-GHJK\n  (or open "+idp.URL+"/device?user_code=BCDF-GHJK)\n") {
				t.Fatalf("stderr %q: no instructions", errOut)
			}
			if got := len(o.exchanged) > 0; got != tt.exchanged {
				t.Fatalf("ExchangeOIDCToken called: %v, want %v", got, tt.exchanged)
			}
			path := filepath.Join(configDir, "betcode", "credentials.json")
			if tt.wantCode != client.ExitOK {
				if _, err := os.Stat(path); !os.IsNotExist(err) {
					t.Fatalf("credentials written after a failed sign-in: %v", err)
				}
				return
			}
			if want := "logged in to " + relay.addr + " as alice (token 0a1b2c3d4e5f, expires "; !strings.HasPrefix(out, want) || strings.Contains(out+errOut, tok) {
				t.Fatalf("login printed %q, want %q… without the token", out, want)
			}
			stored, err := client.LoadCredentials(path)
			if err != nil || *stored != (client.Credentials{Relay: relay.addr, RelayCA: relay.caFile, Token: tok, User: "alice"}) {
				t.Fatalf("stored %+v, %v", stored, err)
			}
			if h, _ := relay.lastAuth(); h != "Bearer "+tok {
				t.Fatalf("WhoAmI got authorization %q", h)
			}
		})
	}
}

// TestLoginOIDCWithoutOIDCService: a relay that predates OIDC sign-in
// (UNIMPLEMENTED) gets the same clear answer.
func TestLoginOIDCWithoutOIDCService(t *testing.T) {
	cliEnv(t)
	relay := startRelay(t, nil)
	_, _, err := runCLI(t, "", "login", "--oidc", "--relay", relay.addr, "--relay-ca", relay.caFile)
	if client.ExitCode(err) != client.ExitInvalidArgs || err == nil || !strings.Contains(err.Error(), "this relay has no OIDC sign-in; log in with a token") {
		t.Fatalf("exit %d, %v", client.ExitCode(err), err)
	}
}

func TestCheckIssuer(t *testing.T) {
	tests := []struct {
		issuer string
		ok     bool
	}{
		{"https://idp.example.com/realms/eng", true},
		{"http://127.0.0.1:5556", true},
		{"http://localhost", true},
		{"http://[::1]:80/x", true},
		{"http://idp.example.com", false},
		{"ftp://idp.example.com", false},
		{"idp.example.com", false},
	}
	for _, tt := range tests {
		if err := checkIssuer(tt.issuer); (err == nil) != tt.ok {
			t.Errorf("checkIssuer(%q) = %v; want ok %v", tt.issuer, err, tt.ok)
		}
	}
}
