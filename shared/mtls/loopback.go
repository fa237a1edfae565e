package mtls

import "net"

// LoopbackHost reports whether host (a name or an IP, no port) is this
// machine: "localhost" or a loopback IP. BetCode serves and accepts plain
// HTTP and gRPC only there; everywhere else needs TLS.
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LoopbackAddr is LoopbackHost for a host:port; false when addr is not one.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && LoopbackHost(host)
}
