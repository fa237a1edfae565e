package codex

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/schema from the pinned codex binary")

// schemaFile is the protocol bundle `codex app-server generate-json-schema`
// writes: every definition, the v2 ones under definitions.v2.
const schemaFile = "codex_app_server_protocol.schemas.json"

// TestSchemaUpToDate regenerates the protocol schema from the pinned binary
// and compares it with testdata/schema. A Codex upgrade that changes the
// protocol fails here: regenerate with -update, then make the types and
// TestTypesMatchSchema agree.
func TestSchemaUpToDate(t *testing.T) {
	bin := requireCodex(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("codex --version: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "codex-cli "+PinnedVersion {
		t.Fatalf("codex --version = %q, want codex-cli %s (the pinned version; run make codex)", got, PinnedVersion)
	}

	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, "app-server", "generate-json-schema", "--out", dir)
	cmd.Env = append(os.Environ(), "CODEX_HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generate-json-schema: %v\n%s", err, out)
	}
	fresh, err := os.ReadFile(filepath.Join(dir, schemaFile))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "schema", schemaFile)
	if *update {
		if err := os.WriteFile(golden, fresh, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, want) {
		t.Fatalf("the app-server protocol of codex %s differs from %s: the Codex protocol changed. "+
			"Run go test ./codex -run TestSchemaUpToDate -update, review the diff, and update protocol.go until TestTypesMatchSchema passes",
			PinnedVersion, golden)
	}
}

// schema is the parsed protocol bundle.
type schema struct {
	defs map[string]json.RawMessage // top-level and v2 definitions
}

type schemaDef struct {
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
	OneOf      []schemaDef                `json:"oneOf"`
	AnyOf      []schemaDef                `json:"anyOf"`
	Enum       []json.RawMessage          `json:"enum"`
	Type       json.RawMessage            `json:"type"`
}

func loadSchema(t *testing.T) *schema {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "schema", schemaFile))
	if err != nil {
		t.Fatal(err)
	}
	var top struct {
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	s := &schema{defs: map[string]json.RawMessage{}}
	var v2 map[string]json.RawMessage
	if err := json.Unmarshal(top.Definitions["v2"], &v2); err != nil {
		t.Fatalf("definitions.v2: %v", err)
	}
	for k, v := range v2 {
		s.defs[k] = v
	}
	for k, v := range top.Definitions {
		if k != "v2" {
			s.defs[k] = v
		}
	}
	return s
}

func (s *schema) def(t *testing.T, name string) schemaDef {
	t.Helper()
	raw, ok := s.defs[name]
	if !ok {
		t.Fatalf("schema has no definition %s", name)
	}
	var d schemaDef
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("definition %s: %v", name, err)
	}
	return d
}

// enumStrings returns the string constants of a union: each variant's enum
// values, and for object variants their property "method" or "type" enum.
func enumStrings(d schemaDef, prop string) []string {
	var out []string
	for _, e := range d.Enum {
		var s string
		if json.Unmarshal(e, &s) == nil {
			out = append(out, s)
		}
	}
	if p, ok := d.Properties[prop]; ok {
		var pd schemaDef
		if json.Unmarshal(p, &pd) == nil {
			out = append(out, enumStrings(pd, "")...)
		}
	}
	for _, v := range append(d.OneOf, d.AnyOf...) {
		out = append(out, enumStrings(v, prop)...)
	}
	return out
}

// jsonFields returns the JSON names of a struct type's fields.
func jsonFields(typ reflect.Type) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Anonymous {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// TestTypesMatchSchema checks the hand-written types against the pinned
// protocol: every JSON field they name exists in the schema definition, and
// every field the schema requires is in the type.
func TestTypesMatchSchema(t *testing.T) {
	s := loadSchema(t)
	tests := []struct {
		def string
		v   any
	}{
		{"InitializeParams", InitializeParams{}},
		{"ClientInfo", ClientInfo{}},
		{"InitializeCapabilities", InitializeCapabilities{}},
		{"InitializeResponse", InitializeResponse{}},
		{"ThreadStartParams", ThreadStartParams{}},
		{"ThreadResumeParams", ThreadResumeParams{}},
		{"ThreadStartResponse", ThreadResponse{}},
		{"ThreadResumeResponse", ThreadResponse{}},
		{"TurnStartParams", TurnStartParams{}},
		{"TurnStartResponse", TurnStartResponse{}},
		{"TurnInterruptParams", TurnInterruptParams{}},
		{"TurnError", TurnError{}},
		{"FileUpdateChange", FileUpdateChange{}},
		{"ItemStartedNotification", ItemNotification{}},
		{"ItemCompletedNotification", ItemNotification{}},
		{"AgentMessageDeltaNotification", DeltaNotification{}},
		{"ReasoningSummaryTextDeltaNotification", DeltaNotification{}},
		{"CommandExecutionOutputDeltaNotification", DeltaNotification{}},
		{"TurnStartedNotification", TurnNotification{}},
		{"TurnCompletedNotification", TurnNotification{}},
		{"TokenUsageBreakdown", TokenUsageBreakdown{}},
		{"ThreadTokenUsage", ThreadTokenUsage{}},
		{"ThreadTokenUsageUpdatedNotification", TokenUsageNotification{}},
		{"ErrorNotification", ErrorNotification{}},
		{"ServerRequestResolvedNotification", ServerRequestResolvedNotification{}},
		{"CommandExecutionRequestApprovalParams", CommandExecutionRequestApprovalParams{}},
		{"FileChangeRequestApprovalParams", FileChangeRequestApprovalParams{}},
		{"CommandExecutionRequestApprovalResponse", ApprovalResponse{}},
		{"FileChangeRequestApprovalResponse", ApprovalResponse{}},
	}
	// Fields of ours the schema leaves out of Turn/Thread's required set
	// are fine; fields the schema requires but we never read are listed.
	ignoreRequired := map[string][]string{
		"ThreadStartResponse":                   {"approvalsReviewer"},
		"ThreadResumeResponse":                  {"approvalsReviewer"},
		"ItemStartedNotification":               {"startedAtMs"},
		"ItemCompletedNotification":             {"completedAtMs"},
		"ReasoningSummaryTextDeltaNotification": {"summaryIndex"},
	}
	for _, tt := range tests {
		t.Run(tt.def, func(t *testing.T) {
			d := s.def(t, tt.def)
			fields := jsonFields(reflect.TypeOf(tt.v))
			for _, f := range fields {
				if _, ok := d.Properties[f]; !ok {
					t.Errorf("%T field %q is not a property of %s", tt.v, f, tt.def)
				}
			}
			for _, r := range d.Required {
				if !slices.Contains(fields, r) && !slices.Contains(ignoreRequired[tt.def], r) {
					t.Errorf("%s requires %q, which %T lacks", tt.def, r, tt.v)
				}
			}
		})
	}
}

// TestItemMatchesSchema checks Item against the ThreadItem variants it
// interprets.
func TestItemMatchesSchema(t *testing.T) {
	s := loadSchema(t)
	variants := map[string]schemaDef{}
	for _, v := range s.def(t, "ThreadItem").OneOf {
		if ts := enumStrings(v, "type"); len(ts) > 0 {
			variants[ts[0]] = v
		}
	}
	fields := jsonFields(reflect.TypeOf(Item{}))
	used := map[string][]string{
		ItemAgentMessage:     {"id", "text"},
		ItemReasoning:        {"id", "summary"},
		ItemCommandExecution: {"id", "command", "cwd", "status", "aggregatedOutput", "exitCode", "durationMs"},
		ItemFileChange:       {"id", "changes", "status"},
		ItemUserMessage:      {"id"},
	}
	for typ, props := range used {
		v, ok := variants[typ]
		if !ok {
			t.Errorf("ThreadItem has no variant %q", typ)
			continue
		}
		for _, p := range props {
			if _, ok := v.Properties[p]; !ok {
				t.Errorf("ThreadItem %s has no property %q", typ, p)
			}
			if !slices.Contains(fields, p) {
				t.Errorf("Item lacks %q", p)
			}
		}
	}
	for _, st := range []string{ItemStatusInProgress, ItemStatusCompleted, ItemStatusFailed, ItemStatusDeclined} {
		if !slices.Contains(enumStrings(s.def(t, "CommandExecutionStatus"), ""), st) ||
			!slices.Contains(enumStrings(s.def(t, "PatchApplyStatus"), ""), st) {
			t.Errorf("item status %q is not in the schema", st)
		}
	}
	for _, st := range []string{TurnStatusCompleted, TurnStatusInterrupted, TurnStatusFailed, TurnStatusInProgress} {
		if !slices.Contains(enumStrings(s.def(t, "TurnStatus"), ""), st) {
			t.Errorf("turn status %q is not in the schema", st)
		}
	}
}

// TestMethodsAndDecisionsMatchSchema checks every method and decision
// constant against the pinned protocol's unions.
func TestMethodsAndDecisionsMatchSchema(t *testing.T) {
	s := loadSchema(t)
	tests := []struct {
		union string
		prop  string
		names []string
	}{
		{"ClientRequest", "method", []string{MethodInitialize, MethodThreadStart, MethodThreadResume, MethodTurnStart, MethodTurnInterrupt}},
		{"ClientNotification", "method", []string{MethodInitialized}},
		{"ServerRequest", "method", []string{MethodCommandApprovalRequest, MethodFileChangeApproval}},
		{"ServerNotification", "method", []string{
			MethodThreadStarted, MethodTurnStarted, MethodTurnCompleted, MethodItemStarted, MethodItemCompleted,
			MethodAgentMessageDelta, MethodReasoningSummaryDelta, MethodReasoningTextDelta, MethodCommandOutputDelta,
			MethodTokenUsageUpdated, MethodError, MethodServerRequestResolved,
		}},
		{"ServerNotification", "method", optOut},
		{"CommandExecutionApprovalDecision", "", []string{string(Accept), string(AcceptForSession), string(Decline), string(Cancel)}},
		{"FileChangeApprovalDecision", "", []string{string(Accept), string(AcceptForSession), string(Decline), string(Cancel)}},
		{"SandboxMode", "", []string{SandboxReadOnly, SandboxWorkspaceWrite, SandboxFullAccess}},
		{"AskForApproval", "", []string{PolicyUntrusted, PolicyOnRequest, PolicyNever}},
	}
	for _, tt := range tests {
		t.Run(tt.union, func(t *testing.T) {
			have := enumStrings(s.def(t, tt.union), tt.prop)
			for _, n := range tt.names {
				if !slices.Contains(have, n) {
					t.Errorf("%s has no %q (have %d names)", tt.union, n, len(have))
				}
			}
		})
	}
}
