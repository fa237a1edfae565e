package webapi

import (
	"context"
	"net/http"
)

// route is one REST operation (or the WebSocket) the handler serves. The
// table is what the OpenAPI test compares with the document.
type route struct {
	Method  string
	Pattern string // http.ServeMux pattern, also the OpenAPI path
	handler http.Handler
}

// authedFunc is a handler of an operation that needs the caller's token.
type authedFunc func(w http.ResponseWriter, r *http.Request, ctx context.Context, c caller)

// authed answers 401 to a request without a bearer token, else passes the
// request on with a context carrying its credentials.
func (h *Handler) authed(fn authedFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r)
		if tok == "" {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "send Authorization: Bearer <token>")
			return
		}
		c := caller{token: tok, machine: r.Header.Get(headerMachine)}
		fn(w, r, h.outgoing(r.Context(), c), c)
	})
}

// routes is every operation of the API but /api/push (docs/web-api.md).
func (h *Handler) routes() []route {
	get, post := http.MethodGet, http.MethodPost
	return []route{
		{get, "/api/health", http.HandlerFunc(h.health)},
		{get, "/api/info", http.HandlerFunc(h.info)},
		{get, "/api/openapi.json", http.HandlerFunc(serveOpenAPI)},
		{get, "/api/ws", http.HandlerFunc(h.serveWS)},
		{post, "/api/sealed", http.HandlerFunc(h.postSealed)},
		{get, "/api/channel", http.HandlerFunc(h.serveChannel)},
		{get, "/api/pair", http.HandlerFunc(h.servePair)},
		{get, "/api/me", h.authed(h.me)},
		{get, "/api/machines", h.authed(h.listMachines)},
		{post, "/api/machines/{id}/switch", h.authed(h.switchMachine)},
		{get, "/api/sessions", h.authed(h.listSessions)},
		{post, "/api/sessions", h.authed(h.startSession)},
		{get, "/api/sessions/{id}", h.authed(h.getSession)},
		{http.MethodPatch, "/api/sessions/{id}", h.authed(h.renameSession)},
		{http.MethodDelete, "/api/sessions/{id}", h.authed(h.deleteSession)},
		{post, "/api/sessions/{id}/stop", h.authed(h.stopSession)},
		{post, "/api/sessions/{id}/messages", h.authed(h.queueMessage)},
		{post, "/api/sessions/{id}/continue", h.authed(h.queueMessage)},
		{get, "/api/sessions/{id}/events", h.authed(h.sessionEvents)},
		{post, "/api/sessions/{id}/permissions/{requestId}", h.authed(h.answerPermission)},
		{post, "/api/sessions/{id}/questions/{questionId}", h.authed(h.answerQuestion)},
		{get, "/api/sessions/{id}/permissions", h.authed(h.permissionLog)},
		{get, "/api/sessions/{id}/changes", h.authed(h.changes)},
		{get, "/api/sessions/{id}/diff", h.authed(h.diff)},
		{get, "/api/sessions/{id}/teammates", h.authed(h.listTeammates)},
		{get, "/api/sessions/{id}/teammates/{agentId}", h.authed(h.getTeammate)},
		{get, "/api/sessions/{id}/tasks", h.authed(h.listTasks)},
		{get, "/api/teammate-specs", h.authed(h.listTeammateSpecs)},
		{post, "/api/teammate-specs", h.authed(h.createTeammateSpec)},
		{http.MethodPatch, "/api/teammate-specs/{id}", h.authed(h.updateTeammateSpec)},
		{http.MethodDelete, "/api/teammate-specs/{id}", h.authed(h.deleteTeammateSpec)},
		{get, "/api/skill-specs", h.authed(h.listSkillSpecs)},
		{post, "/api/skill-specs", h.authed(h.createSkillSpec)},
		{http.MethodDelete, "/api/skill-specs/{id}", h.authed(h.deleteSkillSpec)},
		{get, "/api/permission-rules", h.authed(h.listRules)},
		{post, "/api/permission-rules", h.authed(h.addRule)},
		{http.MethodDelete, "/api/permission-rules/{id}", h.authed(h.deleteRule)},
		{get, "/api/usage", h.authed(h.usage)},
		{get, "/api/dirs", h.authed(h.listDirs)},
		{get, "/api/dirs/validate", h.authed(h.validateDir)},
		{get, "/api/local-sessions", h.authed(h.localSessions)},
		{post, "/api/local-sessions/{id}/adopt", h.authed(h.adoptSession)},
		{post, "/api/voice/transcriptions", h.onMachineOnly(voiceOnMachine, h.transcribe)},
		{get, "/api/sessions/{id}/shares", h.onMachineOnly(shareOnMachine, h.listShares)},
		{post, "/api/sessions/{id}/shares", h.onMachineOnly(shareOnMachine, h.createShare)},
		{http.MethodDelete, "/api/shares/{shareId}", h.onMachineOnly(shareOnMachine, h.revokeShare)},
	}
}

// pushRoutes are the operations Options.Push serves (relay only).
var pushRoutes = []route{
	{Method: http.MethodGet, Pattern: "/api/push"},
	{Method: http.MethodPost, Pattern: "/api/push/subscriptions"},
	{Method: http.MethodDelete, Pattern: "/api/push/subscriptions/{id}"},
	{Method: http.MethodPost, Pattern: "/api/push/test"},
}
