// Package webapi implements BetCode's web API (docs/web-api.md): REST
// under /api, the WebSocket /api/ws, the OpenAPI document and the web
// app's static files, as one http.Handler written against the agent's gRPC
// services.
//
// The handler keeps no state of its own beyond open WebSockets (and the
// session lists they share, one WatchSessions stream per caller) and no
// credentials: every call it makes carries the caller's bearer token as
// gRPC "authorization" metadata (and the X-Betcode-Machine header as
// "x-betcode-machine-id"), so the gRPC server it talks to, the agent's own
// or the relay's client path, authenticates, authorizes and routes it
// exactly as it would a gRPC client's call.
package webapi
