// Package tunnel implements the relay↔agent tunnel protocol.
//
// An agent dials the relay and opens TunnelService.OpenTunnel, a bidi stream
// of TunnelFrames. Conn turns that stream into a byte stream (each
// StreamFrame carries bytes; writes are coalesced into as few frames as the
// stream can take). A hashicorp/yamux session runs on top: the relay is the
// yamux client and opens one yamux stream per forwarded client RPC, so every
// call has its own flow-control window and a stalled client of one call
// never delays another.
//
// On each yamux stream, length-delimited TunnelFrames carry one gRPC call,
// byte for byte:
//
//	relay → agent  metadata{request headers}   (request_id, service_name, method_name set)
//	relay → agent  stream{data: request body bytes} …  stream{end_of_stream} when the client half-closes
//	agent → relay  metadata{response headers}
//	agent → relay  stream{data: response body bytes} …
//	agent → relay  metadata{trailers: grpc-status, grpc-message, …}
//	either side    error{code:"CANCELLED"} and close: the call is abandoned
//
// The body bytes are the gRPC length-prefixed messages exactly as the client
// sent them: the relay never decodes them, so every method of every service
// is forwarded without per-method code, and metadata, deadlines
// (grpc-timeout), status codes and trailers pass through unchanged. The agent
// hands each call to its own grpc.Server through ServeHTTP.
package tunnel
