// Package server implements the agent's gRPC services. Handlers are thin:
// they validate requests, call the session manager and map its errors to
// gRPC status codes carrying the BetCode error code (google.rpc.ErrorInfo
// with domain "betcode.dev" and the code as reason).
//
// Streams send a session's live events as the bytes the session marshaled
// once for its log, shared by every subscriber: importing this package
// installs internal/wirecodec, gRPC's "proto" codec with a pass-through for
// such pre-encoded messages.
package server
