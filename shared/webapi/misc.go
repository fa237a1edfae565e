package webapi

import (
	"context"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func (h *Handler) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "timestamp": h.opts.Now().UTC().Format(time.RFC3339),
		"version": h.opts.Version, "role": h.opts.Role})
}

func (h *Handler) info(w http.ResponseWriter, _ *http.Request) {
	out := map[string]any{"role": h.opts.Role, "version": h.opts.Version, "push": false, "oidc": h.opts.OIDC != nil}
	if h.opts.PushInfo != nil {
		if on, key := h.opts.PushInfo(); on {
			out["push"], out["vapidPublicKey"] = true, key
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// checkToken makes a cheap call so that the server checks the caller's
// token: WhoAmI on the relay, GetVersion on the agent.
func (h *Handler) checkToken(ctx context.Context) error {
	if h.opts.Role == RoleRelay {
		_, err := h.admin.WhoAmI(ctx, &pb.WhoAmIRequest{})
		return err
	}
	_, err := h.version.GetVersion(ctx, &pb.GetVersionRequest{})
	return err
}

// localMachine is the agent's machine.
func (h *Handler) localMachine() Machine {
	if h.opts.LocalMachine != nil {
		m := *h.opts.LocalMachine
		m.Online, m.Current = true, true
		return m
	}
	return Machine{ID: "local", Name: "local", Online: true, Current: true}
}

func (h *Handler) me(w http.ResponseWriter, _ *http.Request, ctx context.Context, _ caller) {
	if h.opts.Role == RoleAgent {
		if err := h.checkToken(ctx); err != nil {
			writeGRPCError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"userId": "local", "displayName": "local user of " + h.localMachine().Name})
		return
	}
	resp, err := h.admin.WhoAmI(ctx, &pb.WhoAmIRequest{})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	name := resp.GetUser().GetEmail()
	if name == "" {
		name = resp.GetUser().GetId()
	}
	writeJSON(w, http.StatusOK, map[string]string{"userId": resp.GetUser().GetId(), "displayName": name})
}

func (h *Handler) listMachines(w http.ResponseWriter, _ *http.Request, ctx context.Context, c caller) {
	if h.opts.Role == RoleAgent {
		if err := h.checkToken(ctx); err != nil {
			writeGRPCError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, []Machine{h.localMachine()})
		return
	}
	resp, err := h.machines.ListMachines(ctx, &pb.ListMachinesRequest{})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	out := make([]Machine, 0, len(resp.Machines))
	for _, m := range resp.Machines {
		out = append(out, machineOf(m, c.machine))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) switchMachine(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	id := r.PathValue("id")
	if h.opts.Role == RoleAgent {
		if err := h.checkToken(ctx); err != nil {
			writeGRPCError(w, err)
			return
		}
		if m := h.localMachine(); m.ID == id {
			writeJSON(w, http.StatusOK, m)
			return
		}
		writeGRPCError(w, statusError(codes.NotFound, "MACHINE_NOT_FOUND", "this agent is machine "+h.localMachine().ID+" only"))
		return
	}
	resp, err := h.machines.SwitchMachine(ctx, &pb.SwitchMachineRequest{MachineId: id})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, machineOf(resp.Machine, resp.GetMachine().GetId()))
}

func (h *Handler) listDirs(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	q := r.URL.Query()
	resp, err := h.workspace.ListDirectories(ctx, &pb.ListDirectoriesRequest{Path: q.Get("path"), IncludeHidden: q.Get("hidden") == "true"})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	dirs := make([]string, 0, len(resp.Directories))
	entries := make([]map[string]any, 0, len(resp.Directories))
	for _, d := range resp.Directories {
		dirs = append(dirs, d.Path)
		entries = append(entries, map[string]any{"name": d.Name, "path": d.Path, "isGitRepo": d.IsGitRepo})
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": resp.Path, "parent": resp.Parent, "directories": dirs,
		"entries": entries, "truncated": resp.Truncated})
}

func (h *Handler) validateDir(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	resp, err := h.workspace.ValidateDirectory(ctx, &pb.ValidateDirectoryRequest{Path: r.URL.Query().Get("path")})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	out := map[string]any{"valid": resp.Valid, "path": resp.Path, "isGitRepo": resp.IsGitRepo}
	if resp.Error != "" {
		out["error"] = resp.Error
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) localSessions(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	resp, err := h.agent.ListLocalSessions(ctx, &pb.ListLocalSessionsRequest{WorkingDirectory: r.URL.Query().Get("cwd")})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	out := make([]map[string]any, 0, len(resp.Sessions))
	for _, s := range resp.Sessions {
		out = append(out, map[string]any{"id": s.SessionId, "cwd": s.WorkingDirectory, "updatedAt": rfc3339(s.UpdatedAt),
			"messageCount": s.MessageCount, "firstPrompt": s.FirstPrompt, "lastMessage": s.LastMessagePreview, "adopted": s.Adopted})
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) adoptSession(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	resp, err := h.agent.AdoptSession(ctx, &pb.AdoptSessionRequest{SessionId: r.PathValue("id")})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sessionOf(resp.Session, nil))
}
