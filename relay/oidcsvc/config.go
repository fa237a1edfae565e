package oidcsvc

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/betcode-dev/betcode/relay/admin"
	"github.com/betcode-dev/betcode/shared/mtls"
)

// Defaults of Config.
const (
	// DefaultDiscoveryTimeout bounds one fetch of the issuer's discovery
	// document or keys.
	DefaultDiscoveryTimeout = 10 * time.Second
	// DefaultRetryAfter is how long a failed discovery is remembered before
	// the next sign-in tries again, so a flood of sign-ins while the
	// identity provider is down does not become a flood against it.
	DefaultRetryAfter = 5 * time.Second
	// DefaultTokenName names the client tokens sign-in creates.
	DefaultTokenName = "oidc"
)

// DefaultScopes are the scopes a client requests when none are configured.
var DefaultScopes = []string{"openid", "email", "profile"}

// Config is the relay's OpenID Connect sign-in. The zero Config (no Issuer,
// no ClientID) disables it.
type Config struct {
	// Issuer is the identity provider's issuer URL (https; http only on
	// loopback, for tests). Its /.well-known/openid-configuration is
	// fetched at the first sign-in.
	Issuer string
	// ClientID is the OAuth 2.0 client registered at the identity provider
	// for BetCode: a public client (no secret) allowed the device code
	// grant. ID tokens must name it as their audience.
	ClientID string
	// Scopes clients request (default DefaultScopes); "openid" and "email"
	// must be among them.
	Scopes []string
	// GroupsClaim, if set, names the ID token claim that lists the user's
	// groups: a group named like an existing team makes the user a member
	// of it (never a demotion, never a removal).
	GroupsClaim string
	// TokenTTL is the lifetime of the client tokens sign-in creates
	// (default admin.DefaultTokenTTL, at most admin.MaxTokenTTL).
	TokenTTL time.Duration
	// DiscoveryTimeout bounds each request to the identity provider
	// (default DefaultDiscoveryTimeout).
	DiscoveryTimeout time.Duration
	// RetryAfter is how long a failed discovery is reused before trying
	// again (default DefaultRetryAfter).
	RetryAfter time.Duration
}

// Enabled reports whether c configures OIDC sign-in.
func (c *Config) Enabled() bool { return c.Issuer != "" || c.ClientID != "" }

// Validate reports a half or wrong configuration, naming the flag.
func (c *Config) Validate() error {
	if !c.Enabled() {
		if c.GroupsClaim != "" || c.TokenTTL != 0 || len(c.Scopes) > 0 {
			return errors.New("oidc: --oidc-scopes, --oidc-groups-claim and --oidc-token-ttl need --oidc-issuer and --oidc-client-id")
		}
		return nil
	}
	if c.Issuer == "" || c.ClientID == "" {
		return errors.New("oidc: --oidc-issuer and --oidc-client-id go together")
	}
	if err := CheckIssuer(c.Issuer); err != nil {
		return fmt.Errorf("oidc: --oidc-issuer: %w", err)
	}
	scopes := c.scopes()
	for _, s := range []string{"openid", "email"} {
		if !slices.Contains(scopes, s) {
			return fmt.Errorf("oidc: --oidc-scopes %s: want %q among them (sign-in needs the ID token's email)", strings.Join(scopes, ","), s)
		}
	}
	if c.TokenTTL < 0 || c.TokenTTL > admin.MaxTokenTTL {
		return fmt.Errorf("oidc: --oidc-token-ttl %s: want 0 (the default, %s) up to %s", c.TokenTTL, admin.DefaultTokenTTL, admin.MaxTokenTTL)
	}
	return nil
}

// scopes returns Scopes split at commas and spaces (a config file or the
// environment may give "openid,email"), or DefaultScopes.
func (c *Config) scopes() []string {
	var out []string
	for _, s := range c.Scopes {
		for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	if len(out) == 0 {
		return slices.Clone(DefaultScopes)
	}
	return out
}

func (c *Config) withDefaults() Config {
	d := *c
	// Issuer stays as given: it must equal the tokens' iss exactly, and
	// some providers' end with a slash (Auth0).
	d.Scopes = c.scopes()
	if d.DiscoveryTimeout <= 0 {
		d.DiscoveryTimeout = DefaultDiscoveryTimeout
	}
	if d.RetryAfter <= 0 {
		d.RetryAfter = DefaultRetryAfter
	}
	return d
}

// CheckIssuer accepts an https URL, or an http one on a loopback host
// (a test provider): ID tokens and keys must not travel in clear.
func CheckIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a URL: %w", issuer, err)
	case u.Host == "" || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%q: want an issuer URL like https://idp.example.com/realms/eng", issuer)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && mtls.LoopbackHost(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%q: want https (http only on loopback)", issuer)
}
