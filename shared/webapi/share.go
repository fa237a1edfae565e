package webapi

import (
	"context"
	"net/http"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Session sharing (docs/web-api.md, "Sharing"; docs/security.md, "Sharing a
// session"): ShareService on the machine. A share's code holds a pairing
// secret, so the relay never serves these routes in clear: the web app
// calls them inside the machine's end-to-end channel (or an agent's own
// --http-listen).

// Share is a session share as the web API shows it.
type Share struct {
	ID         string `json:"id"`
	SessionID  string `json:"sessionId"`
	User       string `json:"user"`
	Mode       string `json:"mode"` // "read" or "answer"
	CreatedAt  string `json:"createdAt,omitempty"`
	ExpiresAt  string `json:"expiresAt,omitempty"`
	RevokedAt  string `json:"revokedAt,omitempty"`
	DeviceID   string `json:"deviceId,omitempty"`
	DeviceName string `json:"deviceName,omitempty"`
}

func shareOf(s *pb.Share) Share {
	mode := "read"
	if s.GetMode() == pb.ShareMode_SHARE_MODE_ANSWER {
		mode = "answer"
	}
	return Share{ID: s.GetId(), SessionID: s.GetSessionId(), User: s.GetUser(), Mode: mode, CreatedAt: rfc3339(s.GetCreatedAt()),
		ExpiresAt: rfc3339(s.GetExpiresAt()), RevokedAt: rfc3339(s.GetRevokedAt()), DeviceID: s.GetDeviceId(), DeviceName: s.GetDeviceName()}
}

// onMachineOnly serves fn to an authenticated caller on the machine and
// refuses it on the relay, before reading the body, with why: what the
// route carries must reach the machine only inside its end-to-end channel.
func (h *Handler) onMachineOnly(why string, fn authedFunc) http.Handler {
	authed := h.authed(fn)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.opts.Role == RoleRelay {
			writeError(w, http.StatusForbidden, "E2E_REQUIRED", why+": pair this browser with the machine")
			return
		}
		authed.ServeHTTP(w, r)
	})
}

// shareOnMachine is why the share routes are refused on the relay.
const shareOnMachine = "sharing goes to the machine only inside its end-to-end channel (a share code holds a pairing secret)"

func (h *Handler) listShares(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	resp, err := pb.NewShareServiceClient(h.opts.Conn).ListShares(ctx, &pb.ListSharesRequest{SessionId: r.PathValue("id")})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	out := make([]Share, 0, len(resp.Shares))
	for _, s := range resp.Shares {
		out = append(out, shareOf(s))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) createShare(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	var b struct {
		User string `json:"user"`
		Mode string `json:"mode"`
		// ExpiresAt (RFC 3339) or ExpiresInSeconds; neither: the machine's default (24 h).
		ExpiresAt        string `json:"expiresAt"`
		ExpiresInSeconds int64  `json:"expiresInSeconds"`
	}
	if !readJSON(w, r, &b) {
		return
	}
	req := &pb.CreateShareRequest{SessionId: r.PathValue("id"), User: b.User}
	switch b.Mode {
	case "", "read":
		req.Mode = pb.ShareMode_SHARE_MODE_READ
	case "answer":
		req.Mode = pb.ShareMode_SHARE_MODE_ANSWER
	default:
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", `mode is "read" or "answer"`)
		return
	}
	switch {
	case b.ExpiresAt != "":
		t, err := time.Parse(time.RFC3339, b.ExpiresAt)
		if err != nil {
			writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "expiresAt is an RFC 3339 time")
			return
		}
		req.ExpiresAt = timestamppb.New(t)
	case b.ExpiresInSeconds > 0:
		req.ExpiresAt = timestamppb.New(h.opts.Now().Add(time.Duration(b.ExpiresInSeconds) * time.Second))
	case b.ExpiresInSeconds < 0:
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "expiresInSeconds is positive")
		return
	}
	resp, err := pb.NewShareServiceClient(h.opts.Conn).CreateShare(ctx, req)
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"share": shareOf(resp.Share), "code": resp.Code, "codeExpiresAt": rfc3339(resp.CodeExpiresAt)})
}

func (h *Handler) revokeShare(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	resp, err := pb.NewShareServiceClient(h.opts.Conn).RevokeShare(ctx, &pb.RevokeShareRequest{ShareId: r.PathValue("shareId")})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"share": shareOf(resp.Share), "channelsClosed": resp.ChannelsClosed})
}
