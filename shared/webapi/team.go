package webapi

import (
	"context"
	"net/http"
	"strings"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// The ccgrid team view (docs/web-api.md, "Teams"): a session's teammates
// and tasks, teammate specs and skill specs, each route one TeamService
// call. The agent derives teammates and tasks from its subagents and the
// session's event log; nothing here keeps or recomputes them.

// Teammate is a teammate as the web API shows it: ccgrid's fields, then
// BetCode's.
type Teammate struct {
	AgentID   string `json:"agentId"`
	SessionID string `json:"sessionId"`
	Name      string `json:"name"`
	AgentType string `json:"agentType"`
	// Status is ccgrid's: starting, working, idle or stopped.
	Status string `json:"status"`
	Output string `json:"output"`
	// Kind is subagent (SubagentService) or task_tool (Claude Code's
	// Agent/Task tool inside the session).
	Kind              string  `json:"kind"`
	TeammateSessionID string  `json:"teammateSessionId,omitempty"`
	SubagentStatus    string  `json:"subagentStatus,omitempty"`
	Error             string  `json:"error,omitempty"`
	OrchestrationID   string  `json:"orchestrationId,omitempty"`
	StepID            string  `json:"stepId,omitempty"`
	Prompt            string  `json:"prompt,omitempty"`
	CreatedAt         string  `json:"createdAt,omitempty"`
	FinishedAt        string  `json:"finishedAt,omitempty"`
	CostUSD           float64 `json:"costUsd,omitempty"`
}

// TeamTask is one task of a session as the web API shows it.
type TeamTask struct {
	ID          string `json:"id"`
	Subject     string `json:"subject"`
	Description string `json:"description,omitempty"`
	// Status is ccgrid's: pending, in_progress or completed.
	Status          string   `json:"status"`
	AssignedAgentID string   `json:"assignedAgentId,omitempty"`
	Blocks          []string `json:"blocks"`
	BlockedBy       []string `json:"blockedBy"`
	// StepStatus tells a failed, skipped or cancelled step from a
	// pending or completed one.
	StepStatus      string `json:"stepStatus,omitempty"`
	OrchestrationID string `json:"orchestrationId,omitempty"`
}

// TeammateSpec is a saved teammate template.
type TeammateSpec struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Role         string   `json:"role"`
	Instructions string   `json:"instructions,omitempty"`
	SkillIDs     []string `json:"skillIds"`
	Model        string   `json:"model,omitempty"`
	CreatedAt    string   `json:"createdAt"`
	UpdatedAt    string   `json:"updatedAt,omitempty"`
}

// SkillSpec is a saved skill.
type SkillSpec struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// SkillType is official, external or internal.
	SkillType      string `json:"skillType"`
	CreatedAt      string `json:"createdAt"`
	PluginName     string `json:"pluginName,omitempty"`
	SkillMdContent string `json:"skillMdContent,omitempty"`
	AllowedTools   string `json:"allowedTools,omitempty"`
	ArgumentHint   string `json:"argumentHint,omitempty"`
}

var teammateStatusNames = map[pb.TeammateStatus]string{
	pb.TeammateStatus_TEAMMATE_STATUS_STARTING: "starting",
	pb.TeammateStatus_TEAMMATE_STATUS_WORKING:  "working",
	pb.TeammateStatus_TEAMMATE_STATUS_IDLE:     "idle",
	pb.TeammateStatus_TEAMMATE_STATUS_STOPPED:  "stopped",
}

var taskStatusNames = map[pb.TeamTaskStatus]string{
	pb.TeamTaskStatus_TEAM_TASK_STATUS_PENDING:     "pending",
	pb.TeamTaskStatus_TEAM_TASK_STATUS_IN_PROGRESS: "in_progress",
	pb.TeamTaskStatus_TEAM_TASK_STATUS_COMPLETED:   "completed",
}

var skillTypeNames = map[pb.SkillType]string{
	pb.SkillType_SKILL_TYPE_OFFICIAL: "official",
	pb.SkillType_SKILL_TYPE_EXTERNAL: "external",
	pb.SkillType_SKILL_TYPE_INTERNAL: "internal",
}

// subagentStatusName is a SubagentStatus in lower case ("completed"), or
// "" when unset.
func subagentStatusName(s pb.SubagentStatus) string {
	if s == pb.SubagentStatus_SUBAGENT_STATUS_UNSPECIFIED {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(s.String(), "SUBAGENT_STATUS_"))
}

func teammateOf(t *pb.Teammate) Teammate {
	status := teammateStatusNames[t.GetStatus()]
	if status == "" {
		status = "starting" // unset by an agent that does not know yet
	}
	kind := "subagent"
	if t.GetKind() == pb.TeammateKind_TEAMMATE_KIND_TASK_TOOL {
		kind = "task_tool"
	}
	return Teammate{
		AgentID: t.GetAgentId(), SessionID: t.GetSessionId(), Name: t.GetName(), AgentType: t.GetAgentType(),
		Status: status, Output: t.GetOutput(), Kind: kind, TeammateSessionID: t.GetTeammateSessionId(),
		SubagentStatus: subagentStatusName(t.GetSubagentStatus()), Error: t.GetError(),
		OrchestrationID: t.GetOrchestrationId(), StepID: t.GetStepId(), Prompt: t.GetPrompt(),
		CreatedAt: rfc3339(t.GetCreatedAt()), FinishedAt: rfc3339(t.GetFinishedAt()), CostUSD: t.GetCostUsd(),
	}
}

func teamTaskOf(t *pb.TeamTask) TeamTask {
	status := taskStatusNames[t.GetStatus()]
	if status == "" {
		status = "pending"
	}
	return TeamTask{
		ID: t.GetId(), Subject: t.GetSubject(), Description: t.GetDescription(), Status: status,
		AssignedAgentID: t.GetAssignedAgentId(), Blocks: nonNil(t.GetBlocks()), BlockedBy: nonNil(t.GetBlockedBy()),
		StepStatus: subagentStatusName(t.GetStepStatus()), OrchestrationID: t.GetOrchestrationId(),
	}
}

func teammateSpecOf(s *pb.TeammateSpec) TeammateSpec {
	return TeammateSpec{
		ID: s.GetId(), Name: s.GetName(), Role: s.GetRole(), Instructions: s.GetInstructions(),
		SkillIDs: nonNil(s.GetSkillIds()), Model: s.GetModel(),
		CreatedAt: rfc3339(s.GetCreatedAt()), UpdatedAt: rfc3339(s.GetUpdatedAt()),
	}
}

func skillSpecOf(s *pb.SkillSpec) SkillSpec {
	return SkillSpec{
		ID: s.GetId(), Name: s.GetName(), Description: s.GetDescription(), SkillType: skillTypeNames[s.GetSkillType()],
		CreatedAt: rfc3339(s.GetCreatedAt()), PluginName: s.GetPluginName(), SkillMdContent: s.GetSkillMdContent(),
		AllowedTools: s.GetAllowedTools(), ArgumentHint: s.GetArgumentHint(),
	}
}

// nonNil makes an absent list [] in JSON, as ccgrid's types have it.
func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// listOf converts a list, never null in JSON.
func listOf[P any, T any](in []P, conv func(P) T) []T {
	out := make([]T, 0, len(in))
	for _, x := range in {
		out = append(out, conv(x))
	}
	return out
}

func (h *Handler) listTeammates(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	resp, err := h.team.ListTeammates(ctx, &pb.ListTeammatesRequest{SessionId: r.PathValue("id")})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, listOf(resp.GetTeammates(), teammateOf))
}

func (h *Handler) getTeammate(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	resp, err := h.team.GetTeammate(ctx, &pb.GetTeammateRequest{SessionId: r.PathValue("id"), AgentId: r.PathValue("agentId")})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, teammateOf(resp.GetTeammate()))
}

func (h *Handler) listTasks(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	resp, err := h.team.ListTasks(ctx, &pb.ListTasksRequest{SessionId: r.PathValue("id")})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, listOf(resp.GetTasks(), teamTaskOf))
}

func (h *Handler) listTeammateSpecs(w http.ResponseWriter, _ *http.Request, ctx context.Context, _ caller) {
	resp, err := h.team.ListTeammateSpecs(ctx, &pb.ListTeammateSpecsRequest{})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, listOf(resp.GetSpecs(), teammateSpecOf))
}

// teammateSpecBody is the body of POST and PATCH /api/teammate-specs: a
// field left out is not sent (PATCH) or empty (POST).
type teammateSpecBody struct {
	Name         *string   `json:"name"`
	Role         *string   `json:"role"`
	Instructions *string   `json:"instructions"`
	SkillIDs     *[]string `json:"skillIds"`
	Model        *string   `json:"model"`
}

// spec returns the spec the body describes and the TeamService field
// names of the fields it has.
func (b teammateSpecBody) spec() (*pb.TeammateSpec, []string) {
	s := &pb.TeammateSpec{}
	var mask []string
	set := func(field string, dst *string, v *string) {
		if v != nil {
			*dst = *v
			mask = append(mask, field)
		}
	}
	set("name", &s.Name, b.Name)
	set("role", &s.Role, b.Role)
	set("instructions", &s.Instructions, b.Instructions)
	if b.SkillIDs != nil {
		s.SkillIds = *b.SkillIDs
		mask = append(mask, "skill_ids")
	}
	set("model", &s.Model, b.Model)
	return s, mask
}

func (h *Handler) createTeammateSpec(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	var b teammateSpecBody
	if !readJSON(w, r, &b) {
		return
	}
	// TeamService validates the spec (a name, known skills, no duplicate).
	spec, _ := b.spec()
	resp, err := h.team.CreateTeammateSpec(ctx, &pb.CreateTeammateSpecRequest{Spec: spec})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, teammateSpecOf(resp.GetSpec()))
}

func (h *Handler) updateTeammateSpec(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	var b teammateSpecBody
	if !readJSON(w, r, &b) {
		return
	}
	id := r.PathValue("id")
	spec, mask := b.spec()
	if len(mask) == 0 {
		// An empty update_mask means every field to TeamService: a body
		// with nothing to change changes nothing and answers the spec.
		h.answerTeammateSpec(w, ctx, id)
		return
	}
	spec.Id = id
	resp, err := h.team.UpdateTeammateSpec(ctx, &pb.UpdateTeammateSpecRequest{Spec: spec, UpdateMask: mask})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, teammateSpecOf(resp.GetSpec()))
}

// answerTeammateSpec answers the spec with id as it is saved.
func (h *Handler) answerTeammateSpec(w http.ResponseWriter, ctx context.Context, id string) {
	resp, err := h.team.ListTeammateSpecs(ctx, &pb.ListTeammateSpecsRequest{})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	for _, s := range resp.GetSpecs() {
		if s.GetId() == id {
			writeJSON(w, http.StatusOK, teammateSpecOf(s))
			return
		}
	}
	writeError(w, http.StatusNotFound, "SPEC_NOT_FOUND", "no teammate spec with id "+id)
}

func (h *Handler) deleteTeammateSpec(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	if _, err := h.team.DeleteTeammateSpec(ctx, &pb.DeleteTeammateSpecRequest{Id: r.PathValue("id")}); err != nil {
		writeGRPCError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) listSkillSpecs(w http.ResponseWriter, _ *http.Request, ctx context.Context, _ caller) {
	resp, err := h.team.ListSkillSpecs(ctx, &pb.ListSkillSpecsRequest{})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, listOf(resp.GetSpecs(), skillSpecOf))
}

func (h *Handler) createSkillSpec(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	var b SkillSpec
	if !readJSON(w, r, &b) {
		return
	}
	var typ pb.SkillType
	for t, name := range skillTypeNames {
		if name == b.SkillType {
			typ = t
		}
	}
	if typ == pb.SkillType_SKILL_TYPE_UNSPECIFIED {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "skillType must be official, external or internal")
		return
	}
	resp, err := h.team.CreateSkillSpec(ctx, &pb.CreateSkillSpecRequest{Spec: &pb.SkillSpec{
		Name: b.Name, Description: b.Description, SkillType: typ, SkillMdContent: b.SkillMdContent,
		PluginName: b.PluginName, AllowedTools: b.AllowedTools, ArgumentHint: b.ArgumentHint,
	}})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, skillSpecOf(resp.GetSpec()))
}

func (h *Handler) deleteSkillSpec(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	if _, err := h.team.DeleteSkillSpec(ctx, &pb.DeleteSkillSpecRequest{Id: r.PathValue("id")}); err != nil {
		writeGRPCError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
