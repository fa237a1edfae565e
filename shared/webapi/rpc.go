package webapi

import (
	"context"
	"net/http"
	"strings"

	"google.golang.org/grpc/metadata"
)

// Metadata keys of the calls the handler makes.
const (
	mdAuthorization = "authorization"
	mdMachine       = "x-betcode-machine-id"     // the relay routes by it
	mdFollow        = "x-betcode-follow"         // ResumeSession stays open
	mdClientVersion = "x-betcode-client-version" // the agent's version check
	headerMachine   = "X-Betcode-Machine"        // the REST header
)

// caller is who a request came from: its token and the machine it names.
type caller struct {
	token   string
	machine string
}

// bearer returns the token of an "Authorization: Bearer" header, or "".
func bearer(r *http.Request) string {
	const scheme = "bearer "
	v := r.Header.Get("Authorization")
	if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return ""
	}
	return strings.TrimSpace(v[len(scheme):])
}

// outgoing returns ctx with the caller's credentials as gRPC metadata.
func (h *Handler) outgoing(ctx context.Context, c caller) context.Context {
	kv := []string{mdAuthorization, "Bearer " + c.token}
	if c.machine != "" && h.opts.Role == RoleRelay {
		kv = append(kv, mdMachine, c.machine)
	}
	if h.opts.Version != "" {
		kv = append(kv, mdClientVersion, h.opts.Version)
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}
