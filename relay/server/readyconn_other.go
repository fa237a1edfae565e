//go:build !linux

package server

import (
	"crypto/tls"
	"net"
)

// newReadyConn returns tc: grpc-go reads it through a bufio.Reader of its
// own (see readyconn_linux.go for what Linux does instead).
func newReadyConn(tc *tls.Conn) net.Conn { return tc }
