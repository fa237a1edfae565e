package daemon

import (
	"fmt"
	"time"

	"github.com/betcode-dev/betcode/agent/config"
	"github.com/betcode-dev/betcode/agent/permission"
	"github.com/betcode-dev/betcode/agent/session"
)

// settingsSnapshot returns cfg.Settings, or, for a Config built without
// one, the settings cfg holds (sources unknown).
func settingsSnapshot(cfg Config) config.Snapshot {
	if cfg.Settings != nil {
		return *cfg.Settings
	}
	ccgrid := make([]any, 0, len(cfg.PermissionRules))
	for _, r := range cfg.PermissionRules {
		ccgrid = append(ccgrid, map[string]any{"id": r.ID, "toolName": r.ToolName, "pathPattern": r.PathPattern, "behavior": r.Behavior})
	}
	values := map[string]any{
		"listen": cfg.Listen, "data-dir": cfg.DataDir, "claude-bin": cfg.ClaudeBin, "model": cfg.DefaultModel,
		"allow": cfg.Permissions.Allow, "deny": cfg.Permissions.Deny, "ask": cfg.Permissions.Ask, "permission_rules": ccgrid,
		"permission-timeout": cfg.PermissionTimeout, "max-processes": cfg.MaxProcesses, "hang-timeout": cfg.HangTimeout,
		"auto-compact-tokens": cfg.AutoCompactTokens, "tls-cert": cfg.TLSCert, "tls-key": cfg.TLSKey, "tls-client-ca": cfg.TLSClientCA,
		"relay": cfg.Relay, "relay-ca": cfg.RelayCA, "machine-cert": cfg.MachineCert, "machine-key": cfg.MachineKey,
		"machine-name": cfg.MachineName, "cert-renew-check": cfg.CertRenewCheck, "drain-timeout": cfg.DrainTimeout,
		"relay-e2e": cfg.RelayE2E,
	}
	snap := config.Snapshot{Settings: map[string]config.Setting{}, File: config.SettingsPath(cfg.DataDir)}
	for k, v := range values {
		snap.Settings[k] = config.Setting{Value: v}
	}
	return snap
}

// applySettings makes changed hot settings take effect in mgr; values are
// every setting in effect.
func applySettings(mgr *session.Manager, cfg Config, values map[string]any, changed []string) error {
	perms := false
	for _, k := range changed {
		switch k {
		case "allow", "deny", "ask":
			perms = true
		case "model", "permission-timeout", "auto-compact-tokens":
		default:
			return fmt.Errorf("setting %s cannot change while the agent runs", k)
		}
	}
	if perms {
		c := cfg
		c.Permissions = permission.Settings{
			Allow: values["allow"].([]string), Deny: values["deny"].([]string), Ask: values["ask"].([]string),
		}
		eng, err := permissionEngine(c)
		if err != nil {
			return err
		}
		mgr.SetPermissions(eng)
	}
	for _, k := range changed {
		switch k {
		case "model":
			mgr.SetDefaultModel(values[k].(string))
		case "permission-timeout":
			mgr.SetPermissionTimeout(values[k].(time.Duration))
		case "auto-compact-tokens":
			mgr.SetAutoCompactTokens(values[k].(uint64))
		}
	}
	return nil
}
