package oidcsvc

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/store"
)

// maxGroups bounds the groups of one ID token that are looked at.
const maxGroups = 256

// Claims are what sign-in reads from a verified ID token.
type Claims struct {
	Email         string
	EmailVerified bool
	// Groups are the values of the configured groups claim.
	Groups []string
}

// ParseClaims reads the email, email_verified and groupsClaim ("" for
// none) claims of a verified ID token's payload. email_verified may be a
// boolean or the string "true" (some providers send strings); groupsClaim
// may hold a list of strings or one string. Other types are errors:
// guessing what a provider meant is how access is granted by mistake.
func ParseClaims(payload []byte, groupsClaim string) (Claims, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(payload, &raw); err != nil {
		return Claims{}, fmt.Errorf("claims are not a JSON object: %w", err)
	}
	var c Claims
	if b, ok := raw["email"]; ok && string(b) != "null" {
		if err := json.Unmarshal(b, &c.Email); err != nil {
			return Claims{}, fmt.Errorf("claim email is not a string")
		}
		c.Email = strings.TrimSpace(c.Email)
	}
	if b, ok := raw["email_verified"]; ok && string(b) != "null" {
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return Claims{}, fmt.Errorf("claim email_verified: %w", err)
		}
		switch v := v.(type) {
		case bool:
			c.EmailVerified = v
		case string:
			ok, err := strconv.ParseBool(v)
			if err != nil {
				return Claims{}, fmt.Errorf("claim email_verified is %q, not true or false", v)
			}
			c.EmailVerified = ok
		default:
			return Claims{}, fmt.Errorf("claim email_verified is not a boolean")
		}
	}
	if groupsClaim == "" {
		return c, nil
	}
	b, ok := raw[groupsClaim]
	if !ok || string(b) == "null" {
		return c, nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		c.Groups = []string{one}
		return c, nil
	}
	if err := json.Unmarshal(b, &c.Groups); err != nil {
		return Claims{}, fmt.Errorf("claim %s is not a list of strings", groupsClaim)
	}
	return c, nil
}

// MatchUser returns the user c signs in as: the one user whose email is
// c's verified email, compared case-insensitively. Every refusal is
// PERMISSION_DENIED with a message that says what to do; a disabled user
// is refused too (and returned, for the audit log).
func MatchUser(c Claims, users []store.User) (store.User, error) {
	if c.Email == "" {
		return store.User{}, status.Error(codes.PermissionDenied, "the ID token has no email claim: the identity provider must release the user's email (scope email) to sign in to BetCode")
	}
	if !c.EmailVerified {
		return store.User{}, status.Errorf(codes.PermissionDenied, "the identity provider has not verified the email %s (email_verified is not true): verify it there, then sign in again", c.Email)
	}
	var found []store.User
	for _, u := range users {
		if u.Email != "" && strings.EqualFold(u.Email, c.Email) {
			found = append(found, u)
		}
	}
	switch len(found) {
	case 0:
		return store.User{}, status.Errorf(codes.PermissionDenied, "no BetCode user has the email %s; ask an administrator to create one (betcode-relay admin user create NAME --email %s)", c.Email, c.Email)
	case 1:
	default:
		ids := make([]string, len(found))
		for i, u := range found {
			ids[i] = u.ID
		}
		return store.User{}, status.Errorf(codes.PermissionDenied, "BetCode users %s all have the email %s; ask an administrator to leave it to one of them", strings.Join(ids, ", "), c.Email)
	}
	u := found[0]
	if u.Disabled {
		return u, status.Errorf(codes.PermissionDenied, "BetCode user %s (%s) is disabled; ask an administrator", u.ID, c.Email)
	}
	return u, nil
}

// TeamsToJoin returns the teams, in order, that groups name and the user
// is not yet a member of: groups equal to an id in teams and absent from
// memberships. At most maxGroups groups are looked at.
func TeamsToJoin(groups []string, teams []store.Team, memberships []store.Member) []string {
	if len(groups) > maxGroups {
		groups = groups[:maxGroups]
	}
	var out []string
	for _, g := range groups {
		if g == "" || slices.Contains(out, g) {
			continue
		}
		if !slices.ContainsFunc(teams, func(t store.Team) bool { return t.ID == g }) {
			continue
		}
		if slices.ContainsFunc(memberships, func(m store.Member) bool { return m.TeamID == g }) {
			continue
		}
		out = append(out, g)
	}
	return out
}
