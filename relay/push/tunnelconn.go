package push

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/betcode-dev/betcode/shared/tunnel"
)

// tunnelConn is a gRPC client connection whose calls travel over one
// machine's tunnel, as a client's calls do through the router: grpc-go
// speaks HTTP/2 over an in-memory connection to an h2c server whose handler
// forwards each call with tunnel.Client.Forward. The relay's own calls to
// a machine thus use the same path, and the same framing, as everyone
// else's, whether the tunnel carries HTTP/2 or yamux.
type tunnelConn struct {
	*grpc.ClientConn
	srv    *http.Server
	ln     *bufconn.Listener
	served chan struct{} // closed when srv.Serve has returned
}

// dialTunnel returns a gRPC connection over c; Close releases it.
func dialTunnel(c *tunnel.Client) (*tunnelConn, error) {
	var ids atomic.Uint64
	// Buffered, as the tunnel is: both HTTP/2 ends may write first.
	ln := bufconn.Listen(256 << 10)
	protos := new(http.Protocols)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Protocols: protos,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = c.Forward(r.Context(), w, r, "push-"+strconv.FormatUint(ids.Add(1), 10), nil)
		}),
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln) // until Close
	}()
	cc, err := grpc.NewClient("passthrough:///machine",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }),
	)
	if err != nil {
		srv.Close()
		<-served
		return nil, fmt.Errorf("connect over the tunnel: %w", err)
	}
	return &tunnelConn{ClientConn: cc, srv: srv, ln: ln, served: served}, nil
}

// Close closes the gRPC connection and the in-memory server.
func (c *tunnelConn) Close() error {
	err := c.ClientConn.Close()
	c.srv.Close()
	c.ln.Close()
	<-c.served
	return err
}
