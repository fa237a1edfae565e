// Package server implements the agent's gRPC services. Handlers are thin:
// they validate requests, call the session manager and map its errors to
// gRPC status codes carrying the BetCode error code (google.rpc.ErrorInfo
// with domain "betcode.dev" and the code as reason).
package server
