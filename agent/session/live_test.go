package session

import (
	"context"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/permission"
)

// Settings changed while the agent runs reach new sessions and the running
// ones' next decisions; a session keeps its grants across a rules change.
func TestLiveSettings(t *testing.T) {
	m := newManager(t, Config{DefaultDir: t.TempDir(), DefaultModel: "before"})
	ctx := context.Background()
	old, err := m.Create(ctx, CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	grant, err := permission.ParseRule("Bash(make *)", permission.Allow)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.addGrant(ctx, grant); err != nil {
		t.Fatal(err)
	}

	m.SetDefaultModel("after")
	m.SetPermissionTimeout(time.Second)
	m.SetAutoCompactTokens(1000)
	deny, err := permission.ParseRule("Bash(rm *)", permission.Deny)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := permission.New([]permission.Rule{deny}, permission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.SetPermissions(eng)

	s, err := m.Create(ctx, CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Meta().Model; got != "after" {
		t.Errorf("new session's model = %q, want after", got)
	}
	if m.PermissionTimeout() != time.Second || m.AutoCompactTokens() != 1000 {
		t.Errorf("permission timeout %v, auto-compact %d", m.PermissionTimeout(), m.AutoCompactTokens())
	}
	bash := func(cmd string) permission.Request {
		return permission.Request{Tool: "Bash", Input: map[string]any{"command": cmd}, Cwd: "/"}
	}
	for _, sess := range []*Session{old, s} {
		if d := sess.engine().Decide(bash("rm -rf x")); d.Behavior != permission.Deny {
			t.Errorf("session %s: rm decided %v, want the new deny rule", sess.ID(), d.Behavior)
		}
	}
	if d := old.engine().Decide(bash("make test")); d.Behavior != permission.Allow {
		t.Errorf("the old session lost its grant: make decided %v", d.Behavior)
	}
	if d := s.engine().Decide(bash("make test")); d.Behavior != permission.Ask {
		t.Errorf("a new session has another's grant: make decided %v", d.Behavior)
	}
	if g, err := m.Grants(ctx, old.ID()); err != nil || len(g) != 1 || g[0] != "Bash(make *)" {
		t.Errorf("Grants = %v, %v", g, err)
	}
	m.SetPermissionTimeout(0)
	if m.PermissionTimeout() != defaultPermissionTimeout {
		t.Errorf("timeout 0 gives %v, want the default", m.PermissionTimeout())
	}
}
