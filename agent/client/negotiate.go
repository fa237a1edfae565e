package client

import (
	"context"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// ClientVersionMetadata carries the client's version on every call (the
// agent's server.MDClientVersion); an agent refuses calls from a client
// below its minimum with FAILED_PRECONDITION.
const ClientVersionMetadata = "x-betcode-client-version"

// Negotiation is VersionService.NegotiateCapabilities done once per
// connection, before the connection's first Converse (Dial wires it in
// through DialOptions.Negotiation), with the result cached.
type Negotiation struct {
	// Request is sent as is; Dial fills in ClientVersion when empty.
	Request *pb.NegotiateRequest
	// OnWarning, if set, receives each of the agent's warnings once.
	OnWarning func(string)

	mu   sync.Mutex
	done bool
	resp *pb.NegotiateResponse
	err  error
}

// RefusedError is an agent's refusal of this client.
type RefusedError struct {
	Reason, UpgradeURL string
}

func (e *RefusedError) Error() string {
	if e.UpgradeURL == "" || strings.Contains(e.Reason, e.UpgradeURL) {
		return e.Reason
	}
	return e.Reason + " (" + e.UpgradeURL + ")"
}

// GRPCStatus makes a refusal a FAILED_PRECONDITION, which is not retried.
func (e *RefusedError) GRPCStatus() *status.Status {
	return status.New(codes.FailedPrecondition, e.Error())
}

// Do negotiates unless it already has on this connection, and returns the
// agent's answer. A refusal is a *RefusedError, and is cached like a
// success; a failed call is not, so the next Do tries again. An agent
// without VersionService (UNIMPLEMENTED) counts as accepting everything
// it serves, with no granted features.
func (n *Negotiation) Do(ctx context.Context, cc grpc.ClientConnInterface) (*pb.NegotiateResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done {
		return n.resp, n.err
	}
	resp, err := pb.NewVersionServiceClient(cc).NegotiateCapabilities(ctx, n.Request)
	switch {
	case status.Code(err) == codes.Unimplemented:
		resp = &pb.NegotiateResponse{Accepted: true, Warnings: []string{"the agent does not implement VersionService; no features negotiated"}}
	case err != nil:
		// Unwrapped: the caller sees the call's status as if Converse failed.
		return nil, err
	}
	n.done, n.resp = true, resp
	if !resp.Accepted {
		n.err = &RefusedError{Reason: resp.RejectionReason, UpgradeURL: resp.UpgradeUrl}
	}
	if n.OnWarning != nil {
		for _, w := range resp.Warnings {
			n.OnWarning(w)
		}
	}
	return n.resp, n.err
}

// Granted reports whether the negotiation granted a feature (false before
// it ran).
func (n *Negotiation) Granted(feature string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.resp != nil && slices.Contains(n.resp.GrantedFeatures, feature)
}

// Response returns the cached answer, nil before the negotiation ran.
func (n *Negotiation) Response() *pb.NegotiateResponse {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.resp
}

// versionInterceptors send the client version with every call, and
// negotiate (once) before the connection's first Converse.
func versionInterceptors(version string, n *Negotiation) []grpc.DialOption {
	addVersion := func(ctx context.Context) context.Context {
		if version == "" {
			return ctx
		}
		return metadata.AppendToOutgoingContext(ctx, ClientVersionMetadata, version)
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, co ...grpc.CallOption) error {
			return invoker(addVersion(ctx), method, req, reply, cc, co...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, co ...grpc.CallOption) (grpc.ClientStream, error) {
			if n != nil && method == pb.AgentService_Converse_FullMethodName {
				if _, err := n.Do(ctx, cc); err != nil {
					return nil, err
				}
			}
			return streamer(addVersion(ctx), desc, cc, method, co...)
		}),
	}
}
