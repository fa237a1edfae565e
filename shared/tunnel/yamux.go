package tunnel

import (
	"io"
	"time"

	"github.com/hashicorp/yamux"
)

// YamuxConfig is the yamux configuration both ends use. Windows start at
// yamux's 256 KiB per stream; keepalives detect a dead tunnel within a
// minute; logs are discarded (errors surface through the API).
func YamuxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.AcceptBacklog = 256
	c.EnableKeepAlive = true
	c.KeepAliveInterval = 30 * time.Second
	c.ConnectionWriteTimeout = 10 * time.Second
	c.StreamOpenTimeout = 10 * time.Second
	c.StreamCloseTimeout = 30 * time.Second
	c.LogOutput = io.Discard
	c.Logger = nil
	return c
}
