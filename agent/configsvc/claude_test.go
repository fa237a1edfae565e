package configsvc

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/agent/config"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// writeFile writes a fixture, creating its directory.
func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// claudeFixture writes Claude Code configuration for a home and a project
// the way `claude mcp add` and the settings files leave it.
func claudeFixture(t *testing.T, home string) (project string) {
	t.Helper()
	project = filepath.Join(home, "proj")
	writeFile(t, filepath.Join(home, ".claude.json"), `{
  "numStartups": 3,
  "mcpServers": {
    "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"},
    "shared": {"command": "user-shared"}
  },
  "projects": {
    "`+project+`": {
      "mcpServers": {"db": {"type": "stdio", "command": "pg-mcp", "args": ["--ro"], "env": {"PGPASSWORD": "hunter2", "TOKEN": "${PG_TOKEN}"}}},
      "disabledMcpServers": ["github"]
    }
  }
}`)
	writeFile(t, filepath.Join(project, ".mcp.json"), `{"mcpServers": {
  "shared": {"command": "project-shared"},
  "docs": {"type": "sse", "url": "https://docs.example.com/sse"},
  "broken": {"type": "stdio"},
  "rejected": {"command": "x"}
}}`)
	writeFile(t, filepath.Join(home, ".claude", "settings.json"), `{"permissions": {"allow": ["Read(~/notes/**)"], "defaultMode": "default"}}`)
	writeFile(t, filepath.Join(project, ".claude", "settings.json"), `{"model": "sonnet", "permissions": {"deny": ["Bash(git push *)"], "defaultMode": "acceptEdits"}, "env": {"FOO": "1"}, "includeCoAuthoredBy": false}`)
	writeFile(t, filepath.Join(project, ".claude", "settings.local.json"), `{"permissions": {"allow": ["Bash(make *)"]}, "disabledMcpjsonServers": ["rejected"]}`)
	return project
}

func TestListMcpServers(t *testing.T) {
	s, _, _ := newService(t, nil)
	project := claudeFixture(t, s.opts.Home)
	ctx := context.Background()

	got, err := s.ListMcpServers(ctx, &pb.ListMcpServersRequest{WorkingDirectory: project})
	if err != nil {
		t.Fatal(err)
	}
	const (
		user  = pb.ConfigScope_CONFIG_SCOPE_USER
		proj  = pb.ConfigScope_CONFIG_SCOPE_PROJECT
		local = pb.ConfigScope_CONFIG_SCOPE_LOCAL
		stdio = pb.McpTransport_MCP_TRANSPORT_STDIO
	)
	want := []*pb.McpServer{
		{Name: "db", Scope: local, Transport: stdio, Command: "pg-mcp", Args: []string{"--ro"}, Env: map[string]string{"PGPASSWORD": "<redacted>", "TOKEN": "${PG_TOKEN}"}},
		{Name: "shared", Scope: proj, Transport: stdio, Command: "project-shared"},
		{Name: "docs", Scope: proj, Transport: pb.McpTransport_MCP_TRANSPORT_SSE, Url: "https://docs.example.com/sse"},
		{Name: "broken", Scope: proj, Transport: stdio, Status: pb.McpServerStatus_MCP_SERVER_STATUS_FAILED, Error: "stdio server without a command"},
		{Name: "rejected", Scope: proj, Transport: stdio, Command: "x", Status: pb.McpServerStatus_MCP_SERVER_STATUS_DISABLED},
		{Name: "github", Scope: user, Transport: pb.McpTransport_MCP_TRANSPORT_HTTP, Url: "https://api.githubcopilot.com/mcp/", Status: pb.McpServerStatus_MCP_SERVER_STATUS_DISABLED},
	}
	if !equalServers(got.Servers, want) {
		t.Errorf("project servers:\n got %v\nwant %v", got.Servers, want)
	}

	got, err = s.ListMcpServers(ctx, &pb.ListMcpServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want = []*pb.McpServer{
		{Name: "github", Scope: user, Transport: pb.McpTransport_MCP_TRANSPORT_HTTP, Url: "https://api.githubcopilot.com/mcp/"},
		{Name: "shared", Scope: user, Transport: stdio, Command: "user-shared"},
	}
	if !equalServers(got.Servers, want) {
		t.Errorf("user servers:\n got %v\nwant %v", got.Servers, want)
	}

	writeFile(t, filepath.Join(project, ".mcp.json"), `{"mcpServers": `)
	if _, err := s.ListMcpServers(ctx, &pb.ListMcpServersRequest{WorkingDirectory: project}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("unparsable .mcp.json: err = %v, want FAILED_PRECONDITION", err)
	}
	if _, err := s.ListMcpServers(ctx, &pb.ListMcpServersRequest{WorkingDirectory: "proj"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("relative directory: err = %v, want INVALID_ARGUMENT", err)
	}
}

func equalServers(a, b []*pb.McpServer) bool {
	return slices.EqualFunc(a, b, func(x, y *pb.McpServer) bool { return proto.Equal(x, y) })
}

func TestGetPermissions(t *testing.T) {
	// ccgrid rules have no Claude syntax; package permission renders them.
	const ccgrid = `ccgrid{tool=Write path="/etc/**" deny}`
	s, _, _ := newService(t, map[string]config.Setting{
		"allow": {Value: []string{"Bash(go test *)"}},
		"deny":  {Value: []string{"Bash(rm *)"}},
		"ask":   {Value: []string{"WebFetch"}},
		"permission_rules": {Value: []any{
			map[string]any{"id": "r1", "toolname": "Write", "pathpattern": "/etc/**", "behavior": "deny"},
		}},
	})
	project := claudeFixture(t, s.opts.Home)
	ctx := context.Background()
	tests := []struct {
		name string
		req  *pb.GetPermissionsRequest
		want *pb.PermissionRules
	}{
		{name: "user scope", req: &pb.GetPermissionsRequest{}, want: &pb.PermissionRules{
			Allow: []string{"Bash(go test *)", "Read(~/notes/**)"}, Deny: []string{"Bash(rm *)", ccgrid}, Ask: []string{"WebFetch"}, DefaultMode: "default",
		}},
		{name: "project", req: &pb.GetPermissionsRequest{WorkingDirectory: project}, want: &pb.PermissionRules{
			Allow: []string{"Bash(go test *)", "Read(~/notes/**)", "Bash(make *)"}, Deny: []string{"Bash(rm *)", ccgrid, "Bash(git push *)"}, Ask: []string{"WebFetch"}, DefaultMode: "acceptEdits",
		}},
		{name: "session grants", req: &pb.GetPermissionsRequest{SessionId: "s1"}, want: &pb.PermissionRules{
			Allow: []string{"Bash(go test *)", "Read(~/notes/**)", "Bash(make *)"}, Deny: []string{"Bash(rm *)", ccgrid}, Ask: []string{"WebFetch"}, DefaultMode: "default",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.GetPermissions(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tc.want) {
				t.Errorf("GetPermissions:\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestGetSettingsOfAProject(t *testing.T) {
	s, _, _ := newService(t, nil)
	project := claudeFixture(t, s.opts.Home)
	got, err := s.GetSettings(context.Background(), &pb.GetSettingsRequest{Scope: pb.ConfigScope_CONFIG_SCOPE_PROJECT, WorkingDirectory: project})
	if err != nil {
		t.Fatal(err)
	}
	if got.DefaultModel != "sonnet" || got.Env["FOO"] != "1" || got.Permissions.DefaultMode != "acceptEdits" ||
		!slices.Equal(got.Permissions.Deny, []string{"Bash(git push *)"}) || len(got.Extra.Fields) != 1 || got.Extra.Fields["includeCoAuthoredBy"] == nil {
		t.Errorf("project settings = %v", got)
	}
	local, err := s.GetSettings(context.Background(), &pb.GetSettingsRequest{Scope: pb.ConfigScope_CONFIG_SCOPE_LOCAL, WorkingDirectory: project})
	if err != nil || !slices.Equal(local.Permissions.Allow, []string{"Bash(make *)"}) {
		t.Errorf("local settings = %v, %v", local, err)
	}
	if _, err := s.GetSettings(context.Background(), &pb.GetSettingsRequest{Scope: pb.ConfigScope_CONFIG_SCOPE_PROJECT}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("project scope without a directory: err = %v, want INVALID_ARGUMENT", err)
	}
}
