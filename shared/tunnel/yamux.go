package tunnel

import (
	"io"
	"time"

	"github.com/hashicorp/yamux"
)

// YamuxConfig is the yamux configuration both ends use. Windows start at
// yamux's 256 KiB per stream; logs are discarded (errors surface through
// the API). yamux's own keepalive is off: the gRPC connection under the
// tunnel has keepalive pings both ways (agent: 30 s; relay: 30 s, 10 s
// timeout), which saves a goroutine per tunnel on the relay.
func YamuxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.AcceptBacklog = 256
	c.EnableKeepAlive = false
	c.ConnectionWriteTimeout = 10 * time.Second
	c.StreamOpenTimeout = 10 * time.Second
	c.StreamCloseTimeout = 30 * time.Second
	c.LogOutput = io.Discard
	c.Logger = nil
	return c
}
