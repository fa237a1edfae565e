// Package client is the Go client of the agent's API as the betcode CLI uses
// it: dialing the agent (Unix socket or TCP), and a Conversation that keeps a
// Converse stream alive across drops by reconnecting with backoff and
// resuming from the last sequence it saw, so the caller sees every event
// exactly once.
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/telemetry"
)

// DialOptions configure Dial.
type DialOptions struct {
	CAFile  string // trust this CA for TLS (implies TLS)
	TLS     bool   // use TLS (with the system roots unless CAFile)
	Machine string // through a relay: send every call to this machine
	// Token, if set, is sent with every call as "authorization: Bearer
	// <Token>", and only over TLS: the relay's client token.
	Token string
	// AgentToken, if set, is sent the same way with or without TLS: an
	// agent's local token, for its TCP listener (loopback needs no TLS).
	AgentToken string
	// Version, if set, is sent with every call as x-betcode-client-version
	// (agents refuse clients below their minimum).
	Version string
	// Tracing, if set, records a client span per call; its trace context
	// goes with the call (traceparent) either way.
	Tracing *telemetry.Tracing
	// Negotiation, if set, runs once before the connection's first Converse
	// (its Request.ClientVersion defaults to Version); Converse fails with
	// its *RefusedError when the agent refuses this client.
	Negotiation *Negotiation
	// Channel, if set, reaches a paired machine end to end through its
	// relay (addr, CAFile, TLS, Token and Machine are then unused).
	Channel *Channel
}

// ConnectParams is how Dial's connections come back after one is lost: a
// relay replica that dies (its load balancer sends the next connection to
// another) or an agent restarting. gRPC's default waits 1 s before the
// second try and grows to 2 minutes; a person watching a stream expects it
// back within a second, so the first retries come after 50 ms and the
// longest wait is 2 s. MinConnectTimeout leaves a slow mobile link time for
// its TLS handshake.
var ConnectParams = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
	MinConnectTimeout: 10 * time.Second,
}

// Dial connects to an agent at addr: "unix:///path", a bare socket path, or
// host:port. The connection is lazy; errors surface on the first call.
func Dial(addr string, o DialOptions) (*grpc.ClientConn, error) {
	target := addr
	if strings.HasPrefix(addr, "/") {
		target = "unix://" + addr
	}
	creds := insecure.NewCredentials()
	var opts []grpc.DialOption
	if ch := o.Channel; ch != nil {
		// The channel is the transport's security: the relay's TLS and
		// the device's scoped token carry it; inside, plain HTTP/2.
		target = "passthrough:///" + ch.Pairing.MachineID
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return DialChannel(ctx, *ch)
		}))
		o.Token, o.Machine = "", ""
	} else if o.CAFile != "" || o.TLS {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if o.CAFile != "" {
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				return nil, fmt.Errorf("read CA file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("no certificates in %s", o.CAFile)
			}
			cfg.RootCAs = pool
		}
		creds = credentials.NewTLS(cfg)
	} else if !strings.HasPrefix(target, "unix://") && !mtls.LoopbackAddr(target) {
		return nil, errors.New("refusing to talk to " + addr + " without TLS off loopback: pass a CA file")
	}
	opts = append(opts, grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)),
		grpc.WithConnectParams(ConnectParams))
	// A client span per call, sent as traceparent (off, the caller's trace
	// context goes on).
	opts = append(opts, o.Tracing.DialOptions()...)
	switch {
	case o.Token != "" && o.AgentToken != "":
		return nil, errors.New("dial: a client token and an agent token go to different places; pass one")
	case o.Token != "":
		if o.CAFile == "" && !o.TLS {
			return nil, errors.New("refusing to send a client token to " + addr + " without TLS")
		}
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: o.Token, secure: true}))
	case o.AgentToken != "":
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: o.AgentToken}))
	}
	if o.Version != "" || o.Negotiation != nil {
		if n := o.Negotiation; n != nil {
			if n.Request == nil {
				n.Request = &pb.NegotiateRequest{}
			}
			if n.Request.ClientVersion == "" {
				n.Request.ClientVersion = o.Version
			}
		}
		opts = append(opts, versionInterceptors(o.Version, o.Negotiation)...)
	}
	if o.Machine != "" {
		opts = append(opts, grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, co ...grpc.CallOption) error {
			return invoker(metadata.AppendToOutgoingContext(ctx, MachineMetadata, o.Machine), method, req, reply, cc, co...)
		}), grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, co ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(metadata.AppendToOutgoingContext(ctx, MachineMetadata, o.Machine), desc, cc, method, co...)
		}))
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}

// MachineMetadata names the target machine of a call through a relay.
const MachineMetadata = "x-betcode-machine-id"

// bearer sends a token with every call.
type bearer struct {
	token  string
	secure bool // refuse to send it over a connection without TLS
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }

var _ credentials.PerRPCCredentials = bearer{}
