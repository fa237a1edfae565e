package oidcsvc

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/store"
)

func TestParseClaims(t *testing.T) {
	tests := []struct {
		name, payload, groupsClaim string
		want                       Claims
		wantErr                    string
	}{
		{"verified", `{"email":"Alice@Example.com","email_verified":true}`, "", Claims{Email: "Alice@Example.com", EmailVerified: true}, ""},
		{"not verified", `{"email":"a@x.io","email_verified":false}`, "", Claims{Email: "a@x.io"}, ""},
		{"verified missing", `{"email":"a@x.io"}`, "", Claims{Email: "a@x.io"}, ""},
		{"verified as a string", `{"email":"a@x.io","email_verified":"true"}`, "", Claims{Email: "a@x.io", EmailVerified: true}, ""},
		{"unverified as a string", `{"email":"a@x.io","email_verified":"false"}`, "", Claims{Email: "a@x.io"}, ""},
		{"verified as a word", `{"email":"a@x.io","email_verified":"yes please"}`, "", Claims{}, "not true or false"},
		{"verified as a number", `{"email":"a@x.io","email_verified":1}`, "", Claims{}, "not a boolean"},
		{"null claims", `{"email":null,"email_verified":null}`, "", Claims{}, ""},
		{"email not a string", `{"email":["a@x.io"]}`, "", Claims{}, "email is not a string"},
		{"spaces trimmed", `{"email":" a@x.io ","email_verified":true}`, "", Claims{Email: "a@x.io", EmailVerified: true}, ""},
		{"groups list", `{"groups":["eng","ops"]}`, "groups", Claims{Groups: []string{"eng", "ops"}}, ""},
		{"groups one string", `{"roles":"eng"}`, "roles", Claims{Groups: []string{"eng"}}, ""},
		{"groups ignored without a claim name", `{"groups":["eng"]}`, "", Claims{}, ""},
		{"groups absent", `{}`, "groups", Claims{}, ""},
		{"groups not strings", `{"groups":[1,2]}`, "groups", Claims{}, "not a list of strings"},
		{"groups an object", `{"groups":{"eng":true}}`, "groups", Claims{}, "not a list of strings"},
		{"not an object", `[1]`, "", Claims{}, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseClaims([]byte(tt.payload), tt.groupsClaim)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseClaims = %+v, %v; want an error mentioning %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got.Email != tt.want.Email || got.EmailVerified != tt.want.EmailVerified || !slices.Equal(got.Groups, tt.want.Groups) {
				t.Fatalf("ParseClaims = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestMatchUser(t *testing.T) {
	users := []store.User{
		{ID: "alice", Email: "alice@example.com"},
		{ID: "bob", Email: "Bob@Example.com"},
		{ID: "carol", Email: "carol@example.com", Disabled: true},
		{ID: "dave"}, // no email: never matched, even by an empty one
		{ID: "eve1", Email: "eve@example.com"},
		{ID: "eve2", Email: "EVE@example.com"},
	}
	tests := []struct {
		name    string
		claims  Claims
		want    string
		code    codes.Code
		message string
	}{
		{"exact", Claims{Email: "alice@example.com", EmailVerified: true}, "alice", codes.OK, ""},
		{"case-insensitive", Claims{Email: "bob@example.COM", EmailVerified: true}, "bob", codes.OK, ""},
		{"unverified", Claims{Email: "alice@example.com"}, "", codes.PermissionDenied, "has not verified the email alice@example.com"},
		{"no email", Claims{EmailVerified: true}, "", codes.PermissionDenied, "no email claim"},
		{"unknown", Claims{Email: "mallory@example.com", EmailVerified: true}, "", codes.PermissionDenied,
			"no BetCode user has the email mallory@example.com; ask an administrator to create one (betcode-relay admin user create NAME --email mallory@example.com)"},
		{"disabled", Claims{Email: "carol@example.com", EmailVerified: true}, "carol", codes.PermissionDenied, "carol (carol@example.com) is disabled"},
		{"ambiguous", Claims{Email: "eve@example.com", EmailVerified: true}, "", codes.PermissionDenied, "eve1, eve2 all have the email"},
		{"suffix is not a match", Claims{Email: "ice@example.com", EmailVerified: true}, "", codes.PermissionDenied, "no BetCode user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := MatchUser(tt.claims, users)
			if status.Code(err) != tt.code || !strings.Contains(status.Convert(err).Message(), tt.message) {
				t.Fatalf("MatchUser = %q, %v; want %s mentioning %q", u.ID, err, tt.code, tt.message)
			}
			if u.ID != tt.want {
				t.Fatalf("MatchUser = user %q; want %q", u.ID, tt.want)
			}
		})
	}
}

func TestTeamsToJoin(t *testing.T) {
	teams := []store.Team{{ID: "eng"}, {ID: "ops"}, {ID: "sec"}}
	admin := []store.Member{{TeamID: "ops", UserID: "alice", Role: store.RoleAdmin}}
	many := make([]string, maxGroups)
	many = append(many, "eng") // past the bound
	tests := []struct {
		name        string
		groups      []string
		memberships []store.Member
		want        []string
	}{
		{"none", nil, nil, nil},
		{"teams that exist", []string{"eng", "Domain Users", "sec"}, nil, []string{"eng", "sec"}},
		{"already a member keeps the role", []string{"ops", "eng"}, admin, []string{"eng"}},
		{"exact names only", []string{"ENG", "eng "}, nil, nil},
		{"duplicates once", []string{"eng", "eng"}, nil, []string{"eng"}},
		{"bounded", many, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TeamsToJoin(tt.groups, teams, tt.memberships); !slices.Equal(got, tt.want) {
				t.Fatalf("TeamsToJoin = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"disabled", Config{}, ""},
		{"https", Config{Issuer: "https://idp.example.com/realms/eng", ClientID: "betcode"}, ""},
		{"http on loopback", Config{Issuer: "http://127.0.0.1:5556", ClientID: "betcode"}, ""},
		{"http on localhost", Config{Issuer: "http://localhost:5556/", ClientID: "betcode"}, ""},
		{"http elsewhere", Config{Issuer: "http://idp.example.com", ClientID: "betcode"}, "want https"},
		{"no scheme", Config{Issuer: "idp.example.com", ClientID: "betcode"}, "want an issuer URL"},
		{"issuer alone", Config{Issuer: "https://idp.example.com"}, "go together"},
		{"client alone", Config{ClientID: "betcode"}, "go together"},
		{"options without issuer", Config{GroupsClaim: "groups"}, "need --oidc-issuer"},
		{"scopes in one string", Config{Issuer: "https://i.example", ClientID: "c", Scopes: []string{"openid,email groups"}}, ""},
		{"no openid", Config{Issuer: "https://i.example", ClientID: "c", Scopes: []string{"email", "profile"}}, `want "openid"`},
		{"no email", Config{Issuer: "https://i.example", ClientID: "c", Scopes: []string{"openid"}}, `want "email"`},
		{"ttl too long", Config{Issuer: "https://i.example", ClientID: "c", TokenTTL: 9000 * time.Hour}, "--oidc-token-ttl"},
		{"ttl negative", Config{Issuer: "https://i.example", ClientID: "c", TokenTTL: -time.Hour}, "--oidc-token-ttl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate = %v; want %q", err, tt.wantErr)
			}
		})
	}
	c := Config{Issuer: "https://i.example/", ClientID: "c", Scopes: []string{"openid,email", "email", "groups"}}
	if d := c.withDefaults(); !slices.Equal(d.Scopes, []string{"openid", "email", "groups"}) || d.Issuer != "https://i.example/" {
		t.Fatalf("withDefaults = %+v", d)
	}
	if d := (&Config{Issuer: "https://i.example", ClientID: "c"}).withDefaults(); !slices.Equal(d.Scopes, DefaultScopes) {
		t.Fatalf("default scopes = %q", d.Scopes)
	}
}
