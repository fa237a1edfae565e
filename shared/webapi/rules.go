package webapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Sources of a PermissionRule.
const (
	// sourceAgent: the agent's allow/deny settings, which the API edits.
	sourceAgent = "agent"
	// sourceExternal: Claude Code's settings files or the agent's config
	// file's permission_rules; read only here.
	sourceExternal = "external"
)

// ruleID is the id of a rule: a short hash of its behavior and rule, so it
// is stable without storage.
func ruleID(behavior, rule string) string {
	sum := sha256.Sum256([]byte(behavior + "\x00" + rule))
	return hex.EncodeToString(sum[:6])
}

func ruleOf(behavior, rule, source string) PermissionRule {
	tool, pattern := parseRule(rule)
	return PermissionRule{ID: ruleID(behavior, rule), ToolName: tool, PathPattern: pattern, Behavior: behavior, Rule: rule, Source: source}
}

// agentRules reads the agent's own allow and deny lists.
func (h *Handler) agentRules(ctx context.Context) (*pb.PermissionRules, error) {
	s, err := h.config.GetSettings(ctx, &pb.GetSettingsRequest{Scope: pb.ConfigScope_CONFIG_SCOPE_USER})
	if err != nil {
		return nil, err
	}
	if s.Permissions == nil {
		return &pb.PermissionRules{}, nil
	}
	return s.Permissions, nil
}

// rules lists the machine's allow and deny rules in effect: the agent's own
// (editable) and the others GetPermissions reports.
func (h *Handler) rules(ctx context.Context) ([]PermissionRule, error) {
	own, err := h.agentRules(ctx)
	if err != nil {
		return nil, err
	}
	eff, err := h.config.GetPermissions(ctx, &pb.GetPermissionsRequest{})
	if err != nil {
		return nil, err
	}
	out := []PermissionRule{}
	add := func(behavior string, ownList, effList []string) {
		for _, r := range ownList {
			out = append(out, ruleOf(behavior, r, sourceAgent))
		}
		for _, r := range effList {
			if !slices.Contains(ownList, r) {
				out = append(out, ruleOf(behavior, r, sourceExternal))
			}
		}
	}
	add("allow", own.Allow, eff.Allow)
	add("deny", own.Deny, eff.Deny)
	return out, nil
}

func (h *Handler) listRules(w http.ResponseWriter, _ *http.Request, ctx context.Context, _ caller) {
	rules, err := h.rules(ctx)
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rules)
}

// setRules stores the agent's allow or deny list.
func (h *Handler) setRules(ctx context.Context, behavior string, list []string) error {
	perms := &pb.PermissionRules{}
	path := "permissions." + behavior
	if behavior == "allow" {
		perms.Allow = list
	} else {
		perms.Deny = list
	}
	out, err := h.config.UpdateSettings(ctx, &pb.UpdateSettingsRequest{
		Scope: pb.ConfigScope_CONFIG_SCOPE_USER, Settings: &pb.Settings{Permissions: perms},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{path}},
	})
	if err != nil {
		return err
	}
	if len(out.GetOverridden()) > 0 || len(out.GetRestartRequired()) > 0 {
		// Stored, but a flag or an environment variable of the agent sets
		// the list, so the change is not in effect.
		return statusError(codes.FailedPrecondition, "SETTING_OVERRIDDEN",
			"stored, but the agent's --"+behavior+" flag or BETCODE_"+strings.ToUpper(behavior)+" sets these rules, so the change is not in effect")
	}
	return nil
}

func (h *Handler) addRule(w http.ResponseWriter, r *http.Request, ctx context.Context, c caller) {
	var b struct {
		ToolName    string `json:"toolName"`
		PathPattern string `json:"pathPattern"`
		Behavior    string `json:"behavior"`
	}
	if !readJSON(w, r, &b) {
		return
	}
	if b.Behavior != "allow" && b.Behavior != "deny" {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "behavior must be allow or deny")
		return
	}
	if b.ToolName == "" || strings.ContainsAny(b.ToolName, "() ") {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "toolName must be a tool name such as Bash or Edit")
		return
	}
	rule := ruleString(b.ToolName, b.PathPattern)
	h.rulesMu.Lock()
	own, err := h.agentRules(ctx)
	if err == nil {
		list := own.Allow
		if b.Behavior == "deny" {
			list = own.Deny
		}
		if !slices.Contains(list, rule) {
			err = h.setRules(ctx, b.Behavior, append(slices.Clone(list), rule))
		}
	}
	h.rulesMu.Unlock()
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, ruleOf(b.Behavior, rule, sourceAgent))
	h.rulesChanged(ctx, c)
}

func (h *Handler) deleteRule(w http.ResponseWriter, r *http.Request, ctx context.Context, c caller) {
	id := r.PathValue("id")
	h.rulesMu.Lock()
	err := h.removeRule(ctx, id)
	h.rulesMu.Unlock()
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
	h.rulesChanged(ctx, c)
}

// removeRule drops the agent rule with id; h.rulesMu is held.
func (h *Handler) removeRule(ctx context.Context, id string) error {
	own, err := h.agentRules(ctx)
	if err != nil {
		return err
	}
	for _, behavior := range []string{"allow", "deny"} {
		list := own.Allow
		if behavior == "deny" {
			list = own.Deny
		}
		for i, rule := range list {
			if ruleID(behavior, rule) == id {
				return h.setRules(ctx, behavior, slices.Delete(slices.Clone(list), i, i+1))
			}
		}
	}
	all, err := h.rules(ctx)
	if err != nil {
		return err
	}
	for _, r := range all {
		if r.ID == id {
			return statusError(codes.FailedPrecondition, "RULE_READ_ONLY",
				"rule "+r.Rule+" comes from Claude Code's settings or the agent's config file; change it there")
		}
	}
	return statusError(codes.NotFound, "RULE_NOT_FOUND", "no permission rule with id "+id)
}

// rulesChanged tells the WebSockets of the same machine the new rules.
func (h *Handler) rulesChanged(ctx context.Context, c caller) {
	rules, err := h.rules(ctx)
	if err != nil {
		return
	}
	h.hubsMu.Lock()
	hubs := make([]*watchHub, 0, len(h.hubs))
	for _, hub := range h.hubs {
		if hub.machine == c.machine {
			hubs = append(hubs, hub)
		}
	}
	h.hubsMu.Unlock()
	for _, hub := range hubs {
		hub.mu.Lock()
		hub.rules = rules
		hub.broadcast(Event{"type": "permission_rules_updated", "rules": rules})
		hub.mu.Unlock()
	}
}
