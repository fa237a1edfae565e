package permission

import (
	"fmt"
	"strings"
)

// Behavior is what to do with a tool call. The zero value is Ask, the
// engine's default when no rule matches.
type Behavior uint8

const (
	Ask Behavior = iota
	Allow
	Deny
)

func (b Behavior) String() string {
	switch b {
	case Ask:
		return "ask"
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	}
	return fmt.Sprintf("Behavior(%d)", uint8(b))
}

// valid reports whether b is one of the three behaviors.
func (b Behavior) valid() bool { return b <= Deny }

// ParseBehavior parses "allow", "deny" or "ask" (any case).
func ParseBehavior(s string) (Behavior, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "ask":
		return Ask, nil
	case "allow":
		return Allow, nil
	case "deny":
		return Deny, nil
	}
	return Ask, fmt.Errorf("unknown permission behavior %q (want allow, deny or ask)", s)
}
