package configsvc

import (
	"strings"

	"github.com/betcode-dev/betcode/agent/config"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// fieldKeys maps the Settings fields that are agent settings to their keys.
var fieldKeys = map[string]string{
	"default_model":           "model",
	"max_concurrent_sessions": "max-processes",
	"auto_compact_threshold":  "auto-compact-tokens",
	"permissions.allow":       "allow",
	"permissions.deny":        "deny",
	"permissions.ask":         "ask",
}

// changesOf returns the parsed, validated value of every key the mask
// names; an error is INVALID_ARGUMENT naming the key.
func changesOf(in *pb.Settings, paths []string) (map[string]any, error) {
	out := map[string]any{}
	for _, path := range paths {
		var keys []string
		switch {
		case path == "permissions":
			keys = []string{"permissions.allow", "permissions.deny", "permissions.ask"}
		case fieldKeys[path] != "":
			keys = []string{path}
		case strings.HasPrefix(path, "extra."):
			keys = []string{path}
		case path == "permissions.default_mode":
			return nil, invalid(path, "the agent has no default permission mode (a session's mode is set by the client)")
		case path == "feature_flags" || path == "env" || path == "extra":
			return nil, invalid(path, "not an agent setting that can be changed; name the keys as extra.<key>")
		default:
			return nil, invalid(path, "no such setting (see docs/configuration.md)")
		}
		for _, p := range keys {
			key, raw, err := rawValue(in, p)
			if err != nil {
				return nil, err
			}
			k, ok := config.Lookup(key)
			if !ok {
				return nil, invalid(key, config.ErrUnknownKey.Error())
			}
			if k.ReadOnly != "" {
				return nil, invalid(key, "cannot be changed through ConfigService: "+k.ReadOnly)
			}
			v, err := config.Parse(key, raw)
			if err != nil {
				return nil, invalidKey(err)
			}
			out[key] = v
		}
	}
	return out, nil
}

// rawValue returns a mask path's key and its value as JSON would decode it.
func rawValue(in *pb.Settings, path string) (string, any, error) {
	if key, ok := strings.CutPrefix(path, "extra."); ok {
		v, ok := in.GetExtra().GetFields()[key]
		if !ok {
			return key, nil, invalid(key, "named in update_mask but missing from settings.extra")
		}
		return key, v.AsInterface(), nil
	}
	key := fieldKeys[path]
	switch path {
	case "default_model":
		return key, in.GetDefaultModel(), nil
	case "max_concurrent_sessions":
		return key, float64(in.GetMaxConcurrentSessions()), nil
	case "auto_compact_threshold":
		return key, float64(in.GetAutoCompactThreshold()), nil
	case "permissions.allow":
		return key, in.GetPermissions().GetAllow(), nil
	case "permissions.deny":
		return key, in.GetPermissions().GetDeny(), nil
	}
	return key, in.GetPermissions().GetAsk(), nil
}

// secretMask replaces the value of a secret setting that is set.
const secretMask = "********"

// masked is v, or secretMask when k is a secret and v is set: a secret
// never leaves the agent.
func masked(k config.Key, v any) any {
	if s, ok := v.(string); k.Secret && ok && s != "" {
		return secretMask
	}
	return v
}
