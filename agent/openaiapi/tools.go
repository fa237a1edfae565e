package openaiapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// The tools offered to the model carry Claude Code's names and input
// shapes, so that BetCode's permission rules (Bash(go test *), Edit(src/**),
// Read(./secrets/**)) apply to them exactly as they do to Claude's calls.
const (
	ToolBash  = "Bash"
	ToolRead  = "Read"
	ToolWrite = "Write"
	ToolEdit  = "Edit"
	ToolLS    = "LS"
	ToolGrep  = "Grep"
)

// call is one parsed tool call of the model.
type call struct {
	ID   string // call_id
	Name string
	// Args is the raw arguments object as the model sent it.
	Args json.RawMessage
	// Input is the parsed arguments; nil when they did not parse.
	Input *toolInput
	// Err says why the call cannot run (bad arguments, unknown tool).
	Err error
}

// toolInput is the union of the tools' arguments.
type toolInput struct {
	Command     string `json:"command,omitempty"`
	Description string `json:"description,omitempty"`
	Timeout     int    `json:"timeout,omitempty"` // milliseconds
	FilePath    string `json:"file_path,omitempty"`
	Content     string `json:"content,omitempty"`
	OldString   string `json:"old_string,omitempty"`
	NewString   string `json:"new_string,omitempty"`
	ReplaceAll  bool   `json:"replace_all,omitempty"`
	Offset      int    `json:"offset,omitempty"` // first line, 1-based
	Limit       int    `json:"limit,omitempty"`  // lines
	Path        string `json:"path,omitempty"`
	Pattern     string `json:"pattern,omitempty"`
}

// readOnly reports whether a tool only reads inside the working directory.
func readOnly(tool string) bool { return tool == ToolRead || tool == ToolLS || tool == ToolGrep }

// parseCall decodes the arguments of a function call. It never fails: a
// call that cannot run carries Err, which the model is told.
func parseCall(id, name, args string) call {
	c := call{ID: id, Name: name, Args: json.RawMessage(args)}
	if strings.TrimSpace(args) == "" {
		c.Args = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(c.Args, &obj); err != nil || obj == nil {
		c.Args = json.RawMessage("{}")
		c.Err = fmt.Errorf("the arguments of %s are not a JSON object", name)
		return c
	}
	var in toolInput
	if err := json.Unmarshal(c.Args, &in); err != nil {
		c.Err = fmt.Errorf("bad arguments for %s: %v", name, err)
		return c
	}
	c.Input = &in
	c.Err = in.check(name)
	return c
}

// check reports a missing required argument or an unknown tool.
func (in *toolInput) check(tool string) error {
	need := func(field, v string) error {
		if v == "" {
			return fmt.Errorf("%s needs %q", tool, field)
		}
		return nil
	}
	switch tool {
	case ToolBash:
		return need("command", in.Command)
	case ToolRead, ToolWrite:
		return need("file_path", in.FilePath)
	case ToolEdit:
		if err := need("file_path", in.FilePath); err != nil {
			return err
		}
		if in.OldString == in.NewString {
			return errors.New("old_string and new_string of Edit are the same")
		}
		return nil
	case ToolLS:
		return nil
	case ToolGrep:
		return need("pattern", in.Pattern)
	}
	return fmt.Errorf("unknown tool %q (the tools are Bash, Read, Write, Edit, LS and Grep)", tool)
}

// path returns the file or directory the call touches, "" for Bash.
func (in *toolInput) path(tool string) string {
	switch tool {
	case ToolRead, ToolWrite, ToolEdit:
		return in.FilePath
	case ToolLS, ToolGrep:
		if in.Path == "" {
			return "."
		}
		return in.Path
	}
	return ""
}

// description is a short summary of a call for people.
func (in *toolInput) description(tool string) string {
	switch tool {
	case ToolBash:
		if in.Description != "" {
			return in.Description
		}
		return in.Command
	case ToolGrep:
		return fmt.Sprintf("search %q in %s", in.Pattern, in.path(tool))
	}
	return strings.ToLower(tool) + " " + in.path(tool)
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }

func object(required []string, props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

// toolDefs are the function tools of every request.
var toolDefs = []struct {
	name, desc string
	params     map[string]any
}{
	{ToolBash, "Run a shell command (bash -c) in the working directory and return its combined stdout and stderr. Long outputs are truncated.",
		object([]string{"command"}, map[string]any{
			"command":     str("The command line to run."),
			"description": str("What the command does, in a few words."),
			"timeout":     map[string]any{"type": "integer", "description": "Timeout in milliseconds (default 120000, at most 300000)."},
		})},
	{ToolRead, "Read a text file of the working directory. Lines are numbered from 1.",
		object([]string{"file_path"}, map[string]any{
			"file_path": str("Path of the file, relative to the working directory or absolute inside it."),
			"offset":    map[string]any{"type": "integer", "description": "First line to read (1-based)."},
			"limit":     map[string]any{"type": "integer", "description": "Number of lines to read."},
		})},
	{ToolWrite, "Create or overwrite a file of the working directory with the given content; parent directories are created.",
		object([]string{"file_path", "content"}, map[string]any{
			"file_path": str("Path of the file."),
			"content":   str("The whole new content."),
		})},
	{ToolEdit, "Replace old_string with new_string in a file. old_string must occur exactly once unless replace_all is true; an empty old_string creates a new file.",
		object([]string{"file_path", "old_string", "new_string"}, map[string]any{
			"file_path":   str("Path of the file."),
			"old_string":  str("The exact text to replace."),
			"new_string":  str("The replacement text."),
			"replace_all": map[string]any{"type": "boolean", "description": "Replace every occurrence."},
		})},
	{ToolLS, "List a directory of the working directory (directories end with /).",
		object(nil, map[string]any{"path": str("The directory; default the working directory.")})},
	{ToolGrep, "Search files for a regular expression (RE2 syntax); prints path:line:text for each match.",
		object([]string{"pattern"}, map[string]any{
			"pattern": str("The regular expression."),
			"path":    str("File or directory to search; default the working directory."),
		})},
}

// tools returns the request's tool list.
func tools() []responses.ToolUnionParam {
	out := make([]responses.ToolUnionParam, 0, len(toolDefs))
	for _, d := range toolDefs {
		t := responses.ToolParamOfFunction(d.name, d.params, false)
		t.OfFunction.Description = openai.String(d.desc)
		out = append(out, t)
	}
	return out
}
