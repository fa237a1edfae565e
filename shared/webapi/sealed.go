package webapi

import (
	"net/http"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// maxSealedBody bounds POST /api/sealed: one Noise message (at most 65535
// bytes) in base64, and the rest of the JSON.
const maxSealedBody = 96 << 10

// sealedBody is POST /api/sealed's request (docs/e2ee-wire.md §3).
type sealedBody struct {
	Machine        string `json:"machine"`
	Sealed         []byte `json:"sealed"` // standard base64 in JSON
	IdempotencyKey string `json:"idempotency_key"`
}

// postSealed hands a sealed envelope to ChannelService.Deliver: a browser
// or service worker's queued message or permission answer for a machine it
// cannot open a channel to. The relay buffers it while the machine is
// offline; it reads none of it.
func (h *Handler) postSealed(w http.ResponseWriter, r *http.Request) {
	tok := bearer(r)
	if tok == "" {
		w.Header().Set("WWW-Authenticate", "Bearer")
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "send Authorization: Bearer <device token>")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxSealedBody)
	var b sealedBody
	if !readJSON(w, r, &b) {
		return
	}
	switch {
	case len(b.Sealed) == 0:
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "sealed is required (the envelope, base64)")
		return
	case b.IdempotencyKey == "":
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "idempotency_key is required")
		return
	case b.Machine == "" && h.opts.Role == RoleRelay:
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "machine is required")
		return
	}
	ctx := h.outgoing(r.Context(), caller{token: tok, machine: b.Machine})
	resp, err := pb.NewChannelServiceClient(h.opts.Conn).Deliver(ctx, &pb.DeliverRequest{Sealed: b.Sealed, IdempotencyKey: b.IdempotencyKey})
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"accepted": resp.Accepted, "buffered": resp.Buffered})
}
