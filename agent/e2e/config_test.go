package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/betcode-dev/betcode/agent/internal/testenv"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// settingValue returns one key of GetSettings' values.
func settingValue(t *testing.T, s *pb.Settings, key string) *pb.SettingValue {
	t.Helper()
	for _, v := range s.Values {
		if v.Key == key {
			return v
		}
	}
	t.Fatalf("settings have no %s: %v", key, s.Values)
	return nil
}

// An UpdateSettings deny rule decides the next permission request of a
// running session of the real CLI, without a restart; it and a restart-only setting survive a
// restart of the agent, and keys set by flags stay overridden.
func TestConfigServiceUpdateSettings(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	cfg := pb.NewConfigServiceClient(agent.Conn)

	got, err := cfg.GetSettings(ctx, &pb.GetSettingsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v := settingValue(t, got, "permission-timeout"); v.Source != pb.SettingSource_SETTING_SOURCE_DEFAULT || v.Value.GetStringValue() != "5m0s" || !v.Hot {
		t.Errorf("permission-timeout = %v, want the hot default 5m0s", v)
	}
	if v := settingValue(t, got, "data-dir"); v.Source != pb.SettingSource_SETTING_SOURCE_FLAG || v.Value.GetStringValue() != agent.Opts.DataDir {
		t.Errorf("data-dir = %v, want %s from the flag", v, agent.Opts.DataDir)
	}

	// A session whose CLI is running asks before the change.
	dir := agent.ProjectDir(t)
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: dir})
	say(t, s, runTool)
	pr, first := waitForPermission(t, s)
	answer(t, s, pr.RequestId, pb.PermissionDecision_ALLOW_ONCE, "")
	until(t, s, isTurnComplete)
	if !toolFileExists(t, dir) {
		t.Fatal("the allowed tool did not run")
	}
	removeToolFile(t, dir)

	extra, err := structpb.NewStruct(map[string]any{"hang-timeout": "20m", "listen": []any{"127.0.0.1:7999"}})
	if err != nil {
		t.Fatal(err)
	}
	upd, err := cfg.UpdateSettings(ctx, &pb.UpdateSettingsRequest{
		Scope:      pb.ConfigScope_CONFIG_SCOPE_USER,
		Settings:   &pb.Settings{Permissions: &pb.PermissionRules{Deny: []string{"Bash(touch *)"}}, Extra: extra},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"permissions.deny", "extra.hang-timeout", "extra.listen"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(upd.RestartRequired, []string{"hang-timeout"}) || !slices.Equal(upd.Overridden, []string{"listen"}) ||
		!slices.Equal(upd.Permissions.Deny, []string{"Bash(touch *)"}) {
		t.Errorf("UpdateSettings = restart %v, overridden %v, deny %v", upd.RestartRequired, upd.Overridden, upd.Permissions.Deny)
	}
	fi, err := os.Stat(filepath.Join(agent.Opts.DataDir, "settings.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("settings file: %v, %v; want mode 0600", fi, err)
	}
	perms, err := cfg.GetPermissions(ctx, &pb.GetPermissionsRequest{})
	if err != nil || !slices.Contains(perms.Deny, "Bash(touch *)") {
		t.Errorf("GetPermissions = %v, %v; want the new deny rule", perms, err)
	}

	// The same session's next permission request meets the new rule.
	say(t, s, runTool)
	evs := until(t, s, isTurnComplete)
	if prs := permissionRequests(evs); len(prs) != 0 {
		t.Errorf("the new deny rule should decide, yet the user was asked: %v", prs)
	}
	if toolFileExists(t, dir) {
		t.Error("the denied tool ran")
	}
	entries := permissionLog(t, ctx, agent.API, sessionID(t, first))
	if len(entries) != 2 || entries[1].Decision != "deny" || entries[1].Source != "rule" || !strings.Contains(entries[1].Rule, "Bash(touch *)") {
		t.Errorf("permission log = %v, want a deny by Bash(touch *)", entries)
	}
	s.CloseSend()
	drain(t, s)

	// After a restart the stored settings are in effect, from the file.
	agent = agent.Restart(t)
	cfg = pb.NewConfigServiceClient(agent.Conn)
	ctx = ctxT(t)
	got, err = cfg.GetSettings(ctx, &pb.GetSettingsRequest{Scope: pb.ConfigScope_CONFIG_SCOPE_USER})
	if err != nil {
		t.Fatal(err)
	}
	if v := settingValue(t, got, "hang-timeout"); v.Source != pb.SettingSource_SETTING_SOURCE_SETTINGS_FILE || v.Value.GetStringValue() != "20m0s" || v.RestartPending {
		t.Errorf("hang-timeout after a restart = %v, want 20m0s from the settings file", v)
	}
	if v := settingValue(t, got, "listen"); v.Source != pb.SettingSource_SETTING_SOURCE_FLAG {
		t.Errorf("listen after a restart = %v, want the flag's", v)
	}
	if !slices.Equal(got.Permissions.Deny, []string{"Bash(touch *)"}) {
		t.Errorf("deny after a restart = %v", got.Permissions.Deny)
	}
}

// ListMcpServers and GetSettings read Claude Code's own files in the
// agent's HOME and the project.
func TestConfigServiceClaudeFiles(t *testing.T) {
	home := t.TempDir()
	project := filepath.Join(home, "proj")
	writeFixture(t, filepath.Join(home, ".claude.json"), `{"mcpServers": {"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"}},
  "projects": {"`+project+`": {"mcpServers": {"db": {"command": "pg-mcp", "env": {"PGPASSWORD": "hunter2"}}}}}}`)
	writeFixture(t, filepath.Join(project, ".mcp.json"), `{"mcpServers": {"docs": {"type": "sse", "url": "https://docs.example.com/sse"}}}`)
	writeFixture(t, filepath.Join(project, ".claude", "settings.json"), `{"model": "sonnet", "permissions": {"deny": ["Bash(git push *)"]}}`)
	agent := testenv.StartAgent(t, testenv.AgentOptions{Home: home})
	ctx := ctxT(t)
	cfg := pb.NewConfigServiceClient(agent.Conn)

	list, err := cfg.ListMcpServers(ctx, &pb.ListMcpServersRequest{WorkingDirectory: project})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Servers {
		names = append(names, s.Name+"/"+s.Scope.String()+"/"+s.Transport.String())
	}
	want := []string{"db/CONFIG_SCOPE_LOCAL/MCP_TRANSPORT_STDIO", "docs/CONFIG_SCOPE_PROJECT/MCP_TRANSPORT_SSE", "github/CONFIG_SCOPE_USER/MCP_TRANSPORT_HTTP"}
	if !slices.Equal(names, want) {
		t.Errorf("servers = %v, want %v", names, want)
	}
	if len(list.Servers) > 0 && list.Servers[0].Env["PGPASSWORD"] == "hunter2" {
		t.Error("a secret of an MCP server's environment was returned")
	}
	ps, err := cfg.GetSettings(ctx, &pb.GetSettingsRequest{Scope: pb.ConfigScope_CONFIG_SCOPE_PROJECT, WorkingDirectory: project})
	if err != nil || ps.DefaultModel != "sonnet" || !slices.Equal(ps.Permissions.Deny, []string{"Bash(git push *)"}) {
		t.Errorf("project settings = %v, %v", ps, err)
	}
	perms, err := cfg.GetPermissions(ctx, &pb.GetPermissionsRequest{WorkingDirectory: project})
	if err != nil || !slices.Equal(perms.Deny, []string{"Bash(git push *)"}) {
		t.Errorf("GetPermissions = %v, %v", perms, err)
	}
}

// The betcode CLI's config commands, against a real agent.
func TestConfigCLI(t *testing.T) {
	home := t.TempDir()
	project := filepath.Join(home, "proj")
	writeFixture(t, filepath.Join(project, ".mcp.json"), `{"mcpServers": {"docs": {"type": "sse", "url": "https://docs.example.com/sse"}}}`)
	writeFixture(t, filepath.Join(project, ".claude", "settings.json"), `{"permissions": {"deny": ["Bash(git push *)"]}}`)
	agent := testenv.StartAgent(t, testenv.AgentOptions{Home: home})
	sock := agent.Opts.Socket
	tests := []struct {
		name string
		args []string
		code int
		want []string // substrings of stdout
	}{
		{name: "set hot", args: []string{"config", "set", "permission-timeout", "45s"}, want: []string{"permission-timeout set and in effect"}},
		{name: "get one", args: []string{"config", "get", "permission-timeout"}, want: []string{"45s\n"}},
		{name: "set list", args: []string{"config", "set", "deny", "Bash(rm *)", "Bash(curl *)"}, want: []string{"deny set and in effect"}},
		{name: "set restart", args: []string{"config", "set", "max-processes", "3"}, want: []string{"takes effect when the agent restarts"}},
		{name: "set overridden", args: []string{"config", "set", "claude-bin", "claude"}, want: []string{"overrides it"}},
		{name: "get all", args: []string{"config", "get"}, want: []string{"permission-timeout", "settings file", "changed; takes effect on restart", "data-dir"}},
		{name: "invalid", args: []string{"config", "set", "max-processes", "0"}, code: 5},
		{name: "unknown key", args: []string{"config", "set", "colour", "red"}, code: 5},
		{name: "mcp", args: []string{"config", "mcp", "--cwd", project}, want: []string{"docs", "project", "sse", "https://docs.example.com/sse"}},
		{name: "permissions", args: []string{"config", "permissions", "--cwd", project}, want: []string{"deny   Bash(rm *)", "deny   Bash(curl *)", "deny   Bash(git push *)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, sock, tc.args...)
			if code != tc.code {
				t.Fatalf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func writeFixture(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
