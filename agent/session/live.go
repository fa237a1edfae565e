package session

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/betcode-dev/betcode/agent/permission"
)

// live holds the settings a running Manager lets its owner change
// (ConfigService applies them without a restart). It is replaced whole,
// never modified, so readers need no lock.
type live struct {
	permissions       *permission.Engine
	permissionTimeout time.Duration
	defaultModel      string
	autoCompactTokens uint64
}

func (m *Manager) live() *live { return m.settings.Load() }

// update replaces the live settings with a changed copy.
func (m *Manager) update(change func(*live)) {
	m.settingsMu.Lock()
	defer m.settingsMu.Unlock()
	l := *m.settings.Load()
	change(&l)
	m.settings.Store(&l)
}

// Permissions returns the agent's permission rules in effect (without any
// session's grants).
func (m *Manager) Permissions() *permission.Engine { return m.live().permissions }

// SetPermissions replaces the agent's permission rules; every session
// decides its next request with them (plus its own grants). nil means no
// rules.
func (m *Manager) SetPermissions(eng *permission.Engine) {
	if eng == nil {
		eng, _ = permission.New(nil, permission.Options{})
	}
	m.update(func(l *live) { l.permissions = eng })
}

// PermissionTimeout returns the time after which an unanswered permission
// request is denied (negative: never).
func (m *Manager) PermissionTimeout() time.Duration { return m.live().permissionTimeout }

// SetPermissionTimeout changes it for requests made from now on; 0 restores
// the default and a negative value disables the timeout.
func (m *Manager) SetPermissionTimeout(d time.Duration) {
	if d == 0 {
		d = defaultPermissionTimeout
	}
	m.update(func(l *live) { l.permissionTimeout = d })
}

// DefaultModel returns the model of new sessions that name none.
func (m *Manager) DefaultModel() string { return m.live().defaultModel }

// SetDefaultModel changes the model of sessions created from now on.
func (m *Manager) SetDefaultModel(model string) {
	m.update(func(l *live) { l.defaultModel = model })
}

// AutoCompactTokens returns the context size above which a session is
// compacted after a turn (0: never).
func (m *Manager) AutoCompactTokens() uint64 { return m.live().autoCompactTokens }

// SetAutoCompactTokens changes it for turns that end from now on.
func (m *Manager) SetAutoCompactTokens(n uint64) {
	m.update(func(l *live) { l.autoCompactTokens = n })
}

// Grants returns the ALLOW_SESSION grants of a session, oldest first, in
// Claude Code rule syntax (none for an unknown session).
func (m *Manager) Grants(ctx context.Context, sessionID string) ([]string, error) {
	kv, err := m.log.GetKV(ctx, sessionID, grantPrefix)
	if err != nil {
		return nil, fmt.Errorf("load grants: %w", err)
	}
	out := make([]string, 0, len(kv))
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		out = append(out, string(kv[k]))
	}
	return out, nil
}
