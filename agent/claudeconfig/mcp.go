package claudeconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Transport is how Claude Code talks to an MCP server.
type Transport string

// The transports of Claude Code's "type" key ("stdio" when absent).
const (
	Stdio Transport = "stdio"
	SSE   Transport = "sse"
	HTTP  Transport = "http"
)

// McpServer is one configured MCP server.
type McpServer struct {
	Name      string
	Scope     Scope
	Transport Transport
	Command   string
	Args      []string
	// Env has its values redacted unless they only reference variables
	// ("${TOKEN}"), which Claude expands at start.
	Env      map[string]string
	URL      string
	Disabled bool
	// Problem, when set, is why Claude Code cannot start it as configured.
	Problem string
}

// Redacted replaces an MCP server's environment value.
const Redacted = "<redacted>"

type serverJSON struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	URL     string            `json:"url"`
}

type claudeJSON struct {
	McpServers orderedServers         `json:"mcpServers"`
	Projects   map[string]projectJSON `json:"projects"`
}

type projectJSON struct {
	McpServers             orderedServers `json:"mcpServers"`
	EnabledMcpjsonServers  []string       `json:"enabledMcpjsonServers"`
	DisabledMcpjsonServers []string       `json:"disabledMcpjsonServers"`
	DisabledMcpServers     []string       `json:"disabledMcpServers"`
}

// orderedServers keeps the order of the servers in the file.
type orderedServers struct {
	names   []string
	servers map[string]serverJSON
}

func (o *orderedServers) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &o.servers); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		o.names = append(o.names, t.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

// McpServers lists the MCP servers Claude Code would load for a project
// (dir; empty: user scope only), local scope first, then project, then user,
// each in file order.
func McpServers(home, dir string) ([]McpServer, error) {
	var cj claudeJSON
	if _, err := readJSON(filepath.Join(home, ".claude.json"), &cj); err != nil {
		return nil, err
	}
	var out []McpServer
	seen := map[string]bool{}
	add := func(scope Scope, o orderedServers, disabled func(string) bool) {
		for _, name := range o.names {
			if seen[name] {
				continue
			}
			seen[name] = true
			s := server(name, scope, o.servers[name])
			s.Disabled = disabled(name)
			out = append(out, s)
		}
	}
	if dir != "" {
		dir = filepath.Clean(dir)
		proj := cj.Projects[dir]
		off := func(name string) bool { return slices.Contains(proj.DisabledMcpServers, name) }
		add(Local, proj.McpServers, off)
		var mcp struct {
			McpServers orderedServers `json:"mcpServers"`
		}
		if _, err := readJSON(filepath.Join(dir, ".mcp.json"), &mcp); err != nil {
			return nil, err
		}
		rejected := slices.Clone(proj.DisabledMcpjsonServers)
		for _, sc := range []Scope{User, Project, Local} {
			st, err := ReadSettings(home, dir, sc)
			if err != nil {
				return nil, err
			}
			rejected = append(rejected, st.DisabledMcpjsonServers...)
		}
		add(Project, mcp.McpServers, func(name string) bool { return off(name) || slices.Contains(rejected, name) })
		add(User, cj.McpServers, off)
		return out, nil
	}
	add(User, cj.McpServers, func(string) bool { return false })
	return out, nil
}

func server(name string, scope Scope, j serverJSON) McpServer {
	s := McpServer{Name: name, Scope: scope, Command: j.Command, Args: j.Args, URL: j.URL}
	switch j.Type {
	case "", "stdio":
		s.Transport = Stdio
	case "sse":
		s.Transport = SSE
	case "http":
		s.Transport = HTTP
	default:
		s.Transport = Transport(j.Type)
		s.Problem = fmt.Sprintf("unknown type %q", j.Type)
	}
	if len(j.Env) > 0 {
		s.Env = make(map[string]string, len(j.Env))
		for k, v := range j.Env {
			s.Env[k] = redact(v)
		}
	}
	switch {
	case s.Transport == Stdio && s.Command == "":
		s.Problem = "stdio server without a command"
	case (s.Transport == SSE || s.Transport == HTTP) && s.URL == "":
		s.Problem = string(s.Transport) + " server without a url"
	}
	return s
}

// redact hides a value unless it is only a variable reference.
func redact(v string) string {
	if strings.HasPrefix(v, "${") && strings.HasSuffix(v, "}") && strings.Count(v, "${") == 1 {
		return v
	}
	return Redacted
}
