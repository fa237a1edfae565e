package configsvc

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/betcode-dev/betcode/agent/claudeconfig"
	"github.com/betcode-dev/betcode/agent/permission"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// modelled are the Claude settings keys Settings has fields for.
var modelled = []string{"model", "env", "permissions"}

// claudeSettings reads a project's Claude Code settings file.
func (s *Service) claudeSettings(scope pb.ConfigScope, dir string) (*pb.Settings, error) {
	if dir == "" || !filepath.IsAbs(dir) {
		return nil, invalid("working_directory", "an absolute project directory is required for the project and local scopes")
	}
	sc := claudeconfig.Project
	if scope == pb.ConfigScope_CONFIG_SCOPE_LOCAL {
		sc = claudeconfig.Local
	}
	st, err := claudeconfig.ReadSettings(s.opts.Home, dir, sc)
	if err != nil {
		return nil, server.Status(codes.FailedPrecondition, server.CodeInvalidArgument, err.Error())
	}
	extra := maps.Clone(st.Raw)
	for _, k := range modelled {
		delete(extra, k)
	}
	out := &pb.Settings{
		DefaultModel: st.Model, Env: st.Env,
		Permissions: &pb.PermissionRules{Allow: st.Permissions.Allow, Deny: st.Permissions.Deny, Ask: st.Permissions.Ask, DefaultMode: st.Permissions.DefaultMode},
	}
	if len(extra) > 0 {
		if out.Extra, err = structpb.NewStruct(extra); err != nil {
			return nil, server.Status(codes.Internal, server.CodeInternal, "render settings: "+err.Error())
		}
	}
	return out, nil
}

// ListMcpServers lists the MCP servers Claude Code would load in a project
// (or for the user only), from its configuration files. Status is DISABLED
// for servers switched off, FAILED for ones configured so that they cannot
// start, and otherwise unspecified: the agent does not connect to them.
func (s *Service) ListMcpServers(_ context.Context, req *pb.ListMcpServersRequest) (*pb.ListMcpServersResponse, error) {
	if req.WorkingDirectory != "" && !filepath.IsAbs(req.WorkingDirectory) {
		return nil, invalid("working_directory", "must be absolute")
	}
	list, err := claudeconfig.McpServers(s.opts.Home, req.WorkingDirectory)
	if err != nil {
		return nil, server.Status(codes.FailedPrecondition, server.CodeInvalidArgument, err.Error())
	}
	out := &pb.ListMcpServersResponse{}
	for _, m := range list {
		ps := &pb.McpServer{
			Name: m.Name, Command: m.Command, Args: m.Args, Env: m.Env, Url: m.URL,
			Transport: transports[m.Transport], Scope: scopes[m.Scope],
		}
		switch {
		case m.Disabled:
			ps.Status = pb.McpServerStatus_MCP_SERVER_STATUS_DISABLED
		case m.Problem != "":
			ps.Status, ps.Error = pb.McpServerStatus_MCP_SERVER_STATUS_FAILED, m.Problem
		}
		out.Servers = append(out.Servers, ps)
	}
	return out, nil
}

var transports = map[claudeconfig.Transport]pb.McpTransport{
	claudeconfig.Stdio: pb.McpTransport_MCP_TRANSPORT_STDIO,
	claudeconfig.SSE:   pb.McpTransport_MCP_TRANSPORT_SSE,
	claudeconfig.HTTP:  pb.McpTransport_MCP_TRANSPORT_HTTP,
}

var scopes = map[claudeconfig.Scope]pb.ConfigScope{
	claudeconfig.User:    pb.ConfigScope_CONFIG_SCOPE_USER,
	claudeconfig.Project: pb.ConfigScope_CONFIG_SCOPE_PROJECT,
	claudeconfig.Local:   pb.ConfigScope_CONFIG_SCOPE_LOCAL,
}

// GetPermissions returns the rules a tool request meets: the agent's
// (allow / deny / ask and the config file's permission_rules), Claude
// Code's user settings, the project's and local settings when a working
// directory is given, and a session's grants when one is named. default_mode
// is the most specific Claude settings file's.
func (s *Service) GetPermissions(ctx context.Context, req *pb.GetPermissionsRequest) (*pb.PermissionRules, error) {
	if req.WorkingDirectory != "" && !filepath.IsAbs(req.WorkingDirectory) {
		return nil, invalid("working_directory", "must be absolute")
	}
	s.mu.Lock()
	get := func(k string) any { return s.settings[k].Value }
	out := &pb.PermissionRules{
		Allow: slices.Clone(get("allow").([]string)), Deny: slices.Clone(get("deny").([]string)), Ask: slices.Clone(get("ask").([]string)),
	}
	ccgrid, _ := get("permission_rules").([]any)
	s.mu.Unlock()
	if err := addCCGrid(out, ccgrid); err != nil {
		return nil, server.Status(codes.Internal, server.CodeInternal, err.Error())
	}
	scopes := []claudeconfig.Scope{claudeconfig.User}
	if req.WorkingDirectory != "" {
		scopes = append(scopes, claudeconfig.Project, claudeconfig.Local)
	}
	for _, sc := range scopes {
		st, err := claudeconfig.ReadSettings(s.opts.Home, req.WorkingDirectory, sc)
		if err != nil {
			return nil, server.Status(codes.FailedPrecondition, server.CodeInvalidArgument, err.Error())
		}
		out.Allow = append(out.Allow, st.Permissions.Allow...)
		out.Deny = append(out.Deny, st.Permissions.Deny...)
		out.Ask = append(out.Ask, st.Permissions.Ask...)
		if st.Permissions.DefaultMode != "" {
			out.DefaultMode = st.Permissions.DefaultMode
		}
	}
	if req.SessionId != "" && s.opts.Grants != nil {
		g, err := s.opts.Grants(ctx, req.SessionId)
		if err != nil {
			return nil, server.Status(codes.Internal, server.CodeInternal, err.Error())
		}
		out.Allow = append(out.Allow, g...)
	}
	out.Allow, out.Deny, out.Ask = dedupe(out.Allow), dedupe(out.Deny), dedupe(out.Ask)
	return out, nil
}

// addCCGrid adds the config file's ccgrid rules in Claude syntax.
func addCCGrid(out *pb.PermissionRules, rules []any) error {
	for i, r := range rules {
		m, _ := r.(map[string]any)
		// Viper lowercases the keys of the files it reads.
		str := func(k string) string {
			for mk, v := range m {
				if strings.EqualFold(mk, k) {
					s, _ := v.(string)
					return s
				}
			}
			return ""
		}
		rule, err := permission.CCGridRule(str("id"), str("toolName"), str("pathPattern"), str("behavior"))
		if err != nil {
			return fmt.Errorf("permission_rules[%d]: %w", i, err)
		}
		switch rule.Behavior {
		case permission.Allow:
			out.Allow = append(out.Allow, rule.String())
		case permission.Deny:
			out.Deny = append(out.Deny, rule.String())
		default:
			out.Ask = append(out.Ask, rule.String())
		}
	}
	return nil
}

func dedupe(l []string) []string {
	seen := make(map[string]bool, len(l))
	out := l[:0]
	for _, s := range l {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
