package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"time"

	"github.com/betcode-dev/betcode/agent/permission"
)

// ErrUnknownKey is returned for a key that is not a setting.
var ErrUnknownKey = errors.New("not a setting (see docs/configuration.md)")

// KeyError is a setting's invalid value; Key names it.
type KeyError struct {
	Key string
	Err error
}

func (e *KeyError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *KeyError) Unwrap() error { return e.Err }

// Parse converts a JSON-decoded value (string, float64, bool, []any, as
// encoding/json or structpb produce them) to the key's Go type and
// validates it. Errors are *KeyError.
func Parse(name string, raw any) (any, error) {
	k, ok := Lookup(name)
	if !ok {
		return nil, &KeyError{Key: name, Err: ErrUnknownKey}
	}
	v, err := k.convert(raw)
	if err == nil && k.Check != nil {
		err = k.Check(v)
	}
	if err != nil {
		return nil, &KeyError{Key: name, Err: err}
	}
	return v, nil
}

func (k Key) convert(raw any) (any, error) {
	switch k.Kind {
	case String:
		s, ok := raw.(string)
		if !ok {
			return nil, fmt.Errorf("want a string, got %s", jsonType(raw))
		}
		return s, nil
	case StringList:
		switch l := raw.(type) {
		case nil:
			return []string(nil), nil
		case []string:
			return l, nil
		case []any:
			out := make([]string, 0, len(l))
			for i, e := range l {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("[%d]: want a string, got %s", i, jsonType(e))
				}
				out = append(out, s)
			}
			return out, nil
		}
		return nil, fmt.Errorf("want a list of strings, got %s", jsonType(raw))
	case Duration:
		switch d := raw.(type) {
		case time.Duration:
			return d, nil
		case string:
			v, err := time.ParseDuration(d)
			if err != nil {
				return nil, fmt.Errorf("want a duration such as \"30s\" or \"5m\": %w", err)
			}
			return v, nil
		}
		return nil, fmt.Errorf("want a duration string such as \"30s\", got %s", jsonType(raw))
	case Int, Uint:
		var f float64
		switch n := raw.(type) {
		case float64:
			f = n
		case int:
			f = float64(n)
		case uint64:
			f = float64(n)
		default:
			return nil, fmt.Errorf("want a number, got %s", jsonType(raw))
		}
		if f != math.Trunc(f) {
			return nil, fmt.Errorf("want a whole number, got %v", f)
		}
		if k.Kind == Uint {
			if f < 0 || f > 1<<53 {
				return nil, fmt.Errorf("want a number from 0 to 2^53, got %v", f)
			}
			return uint64(f), nil
		}
		if f < math.MinInt32 || f > math.MaxInt32 {
			return nil, fmt.Errorf("%v is out of range", f)
		}
		return int(f), nil
	case Bool:
		b, ok := raw.(bool)
		if !ok {
			return nil, fmt.Errorf("want true or false, got %s", jsonType(raw))
		}
		return b, nil
	case RuleList:
		l, ok := raw.([]any)
		if !ok && raw != nil {
			return nil, fmt.Errorf("want a list of rules, got %s", jsonType(raw))
		}
		return l, nil
	}
	return nil, fmt.Errorf("unknown kind %v", k.Kind)
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64, int, uint64:
		return "a number"
	case bool:
		return "a boolean"
	case []any, []string:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// JSON returns v (of the key's Go type) in its JSON form: durations as
// strings, lists never null.
func JSON(v any) any {
	switch x := v.(type) {
	case time.Duration:
		return x.String()
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	case int:
		return float64(x)
	case uint64:
		return float64(x)
	case nil:
		return []any{}
	}
	return v
}

func nonEmpty(v any) error {
	if v.(string) == "" {
		return errors.New("must not be empty")
	}
	return nil
}

func noSpace(v any) error {
	if strings.ContainsAny(v.(string), " \t\r\n") {
		return errors.New("must not contain spaces")
	}
	return nil
}

func positive(v any) error {
	if v.(int) < 1 {
		return fmt.Errorf("must be at least 1, got %d", v.(int))
	}
	return nil
}

func nonNegative(v any) error {
	if v.(time.Duration) < 0 {
		return errors.New("must not be negative")
	}
	return nil
}

func checkLogLevel(v any) error {
	switch v.(string) {
	case "debug", "info", "warn", "error":
		return nil
	}
	return fmt.Errorf("%q: want debug, info, warn or error", v)
}

func checkHostPort(v any) error {
	if s := v.(string); s != "" {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("want host:port: %w", err)
		}
	}
	return nil
}

func checkListen(v any) error {
	for i, a := range v.([]string) {
		if p, ok := strings.CutPrefix(a, "unix://"); ok {
			if !strings.HasPrefix(p, "/") {
				return fmt.Errorf("[%d] %q: want unix:///absolute/path", i, a)
			}
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("[%d] %q: want unix:///path or host:port", i, a)
		}
	}
	return nil
}

// checkRules parses every rule the way the daemon will.
func checkRules(v any) error {
	for i, s := range v.([]string) {
		if _, err := permission.ParseRule(s, permission.Allow); err != nil {
			return fmt.Errorf("[%d] %q: %w", i, s, err)
		}
	}
	return nil
}
