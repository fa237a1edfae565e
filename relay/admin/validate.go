package admin

import (
	"net/mail"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits on names and lifetimes.
const (
	MaxNameLen      = 64
	MaxEmailLen     = 254
	DefaultTokenTTL = 720 * time.Hour
	MaxTokenTTL     = 8760 * time.Hour
	DefaultJoinTTL  = time.Hour
	MaxJoinTTL      = 24 * time.Hour
)

// checkName reports whether s is 1-MaxNameLen of a-z, 0-9, '.', '_', '-'
// and, with at, '@'.
func checkName(field, s string, at bool) error {
	allowed := "a-z 0-9 . _ -"
	if at {
		allowed += " @"
	}
	if s == "" || len(s) > MaxNameLen {
		return invalid(field, "want 1 to %d of %s, got %d characters", MaxNameLen, allowed, len(s))
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' || at && r == '@'
		if !ok {
			if r >= 'A' && r <= 'Z' {
				return invalid(field, "%q: names are lower case", s)
			}
			return invalid(field, "%q: %q is not allowed (use %s)", s, r, allowed)
		}
	}
	return nil
}

// checkUser reports whether field holds a user name: 1-64 of a-z 0-9 . _
// - @.
func checkUser(field, id string) error { return checkName(field, id, true) }

// checkTeam reports whether field holds a team name: 1-64 of a-z 0-9 . _ -.
func checkTeam(field, id string) error { return checkName(field, id, false) }

// checkEmail accepts "" or a bare address.
func checkEmail(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > MaxEmailLen {
		return invalid("email", "at most %d characters", MaxEmailLen)
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s {
		return invalid("email", "%q is not an address like name@example.com", s)
	}
	return nil
}

// checkTokenName accepts up to MaxNameLen printable characters.
func checkTokenName(s string) error {
	if !utf8.ValidString(s) || utf8.RuneCountInString(s) > MaxNameLen {
		return invalid("name", "want at most %d printable characters", MaxNameLen)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return invalid("name", "%q: only printable characters", s)
		}
	}
	return nil
}

// checkTTL returns d, or def for 0; negative or above maxTTL is invalid.
func checkTTL(field string, d, def, maxTTL time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return def, nil
	case d < 0 || d > maxTTL:
		return 0, invalid(field, "want at most %s, got %s", maxTTL, d)
	}
	return d, nil
}

// required reports an empty field.
func required(field, v string) error {
	if v == "" {
		return invalid(field, "required")
	}
	return nil
}
