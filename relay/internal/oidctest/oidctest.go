// Package oidctest runs a real OpenID Provider on loopback for tests: the
// example OP of github.com/zitadel/oidc (an OpenID-certified library) with
// its device authorization pages, public device clients and users of the
// test's choosing. Tests sign in as a person does, through the provider's
// own pages (SignIn), and get ID tokens signed with the provider's keys.
package oidctest

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// Client ids every Provider registers: public clients (no secret) allowed
// the device code grant.
const (
	// ClientID is BetCode's client.
	ClientID = "betcode"
	// OtherClientID is another application's client: its ID tokens are for
	// another audience.
	OtherClientID = "other-app"
)

// User is an account at the provider. Its username is also its subject.
type User struct {
	Username, Password string
	Email              string
	EmailVerified      bool
	// Groups go into the ID token's "groups" claim when set.
	Groups []string
}

// Provider is a running OpenID Provider.
type Provider struct {
	// Issuer is its issuer URL, http://127.0.0.1:PORT.
	Issuer string
	st     *opStorage
}

// Start runs a provider with users on a loopback port until the test ends.
func Start(t testing.TB, users ...User) *Provider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return Serve(t, ln, users...)
}

// Serve runs a provider with users on ln until the test ends; its issuer
// is http://ADDR of ln.
func Serve(t testing.TB, ln net.Listener, users ...User) *Provider {
	t.Helper()
	issuer := "http://" + ln.Addr().String()
	us := userStore{}
	groups := map[string][]string{}
	for _, u := range users {
		us[u.Username] = &storage.User{
			ID: u.Username, Username: u.Username, Password: u.Password, FirstName: u.Username, LastName: "Test",
			Email: u.Email, EmailVerified: u.EmailVerified, PreferredLanguage: language.English,
		}
		groups[u.Username] = u.Groups
	}
	// The example storage checks that a device authorization's client
	// exists in its own map; the clients the provider answers with are
	// ours (opStorage.GetClientByClientID), which it cannot express.
	known := map[string]*storage.Client{}
	clients := map[string]op.Client{}
	for _, id := range []string{ClientID, OtherClientID} {
		known[id] = storage.DeviceClient(id, "")
		clients[id] = deviceClient{id: id}
	}
	st := &opStorage{Storage: storage.NewStorageWithClients(us, known), clients: clients, groups: groups}
	// A nil logger: SetupServer would install it as the process's default.
	h := exampleop.SetupServer(issuer, st, nil, false)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return &Provider{Issuer: issuer, st: st}
}

// SignIDToken signs claims with the provider's own key, for the tokens no
// sign-in produces (an expired one, one with odd claims). iss, aud and the
// times default to this provider, ClientID and a token valid for an hour.
func (p *Provider) SignIDToken(t testing.TB, claims map[string]any) string {
	t.Helper()
	key, err := p.st.SigningKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	all := map[string]any{"iss": p.Issuer, "aud": []string{ClientID}, "azp": ClientID, "sub": "signed", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range claims {
		all[k] = v
	}
	payload, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: key.SignatureAlgorithm(), Key: jose.JSONWebKey{Key: key.Key(), KeyID: key.ID()}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// userStore implements the example storage's UserStore over a map by
// username, which is also the user id: the example's device pages record
// the username as the subject.
type userStore map[string]*storage.User

func (u userStore) GetUserByID(id string) *storage.User { return u[id] }

func (u userStore) GetUserByUsername(name string) *storage.User { return u[name] }

func (userStore) ExampleClientID() string { return storage.ServiceUserID }

// opStorage is the example storage with public device clients and a
// groups claim.
type opStorage struct {
	*storage.Storage
	clients map[string]op.Client
	groups  map[string][]string
}

func (s *opStorage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	c, ok := s.clients[id]
	if !ok {
		return nil, errors.New("client not found")
	}
	return c, nil
}

// SetUserinfoFromRequest adds the groups claim to the example's claims.
func (s *opStorage) SetUserinfoFromRequest(ctx context.Context, ui *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, ui, req, scopes); err != nil {
		return err
	}
	if g := s.groups[req.GetSubject()]; len(g) > 0 {
		ui.AppendClaims("groups", g)
	}
	return nil
}

// deviceClient is a public client (no secret: a command-line program
// cannot keep one) allowed only the device code grant, whose ID tokens
// carry the user's claims (email) as most providers' do.
type deviceClient struct{ id string }

var _ op.Client = deviceClient{}

func (c deviceClient) GetID() string                     { return c.id }
func (deviceClient) RedirectURIs() []string              { return nil }
func (deviceClient) PostLogoutRedirectURIs() []string    { return nil }
func (deviceClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeNative }
func (deviceClient) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodNone }
func (deviceClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (deviceClient) GrantTypes() []oidc.GrantType         { return []oidc.GrantType{oidc.GrantTypeDeviceCode} }
func (deviceClient) LoginURL(id string) string            { return "/login/username?authRequestID=" + id }
func (deviceClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (deviceClient) IDTokenLifetime() time.Duration       { return time.Hour }
func (deviceClient) DevMode() bool                        { return false }
func (deviceClient) IsScopeAllowed(string) bool           { return false }
func (deviceClient) IDTokenUserinfoClaimsAssertion() bool { return true }
func (deviceClient) ClockSkew() time.Duration             { return 0 }
func (deviceClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (deviceClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
