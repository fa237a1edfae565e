package mtls

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"

	"google.golang.org/grpc/credentials"
)

// ServerCredentials returns gRPC transport credentials for cfg that log each
// failed handshake as one line with DescribeHandshakeError's reason. Plain
// credentials.NewTLS leaves them to grpclog, where an agent refused for an
// expired certificate is easy to miss.
func ServerCredentials(cfg *tls.Config, log *slog.Logger) credentials.TransportCredentials {
	return &loggingCreds{TransportCredentials: credentials.NewTLS(cfg), log: log}
}

type loggingCreds struct {
	credentials.TransportCredentials
	log *slog.Logger
}

func (c *loggingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		// Load balancer probes and port scanners hang up mid-handshake all
		// day; only a refused handshake is worth a warning.
		level := slog.LevelWarn
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			level = slog.LevelDebug
		}
		c.log.Log(context.Background(), level, "tls handshake failed",
			"remote", conn.RemoteAddr().String(), "reason", DescribeHandshakeError(err))
	}
	return out, info, err
}

func (c *loggingCreds) Clone() credentials.TransportCredentials {
	return &loggingCreds{TransportCredentials: c.TransportCredentials.Clone(), log: c.log}
}
