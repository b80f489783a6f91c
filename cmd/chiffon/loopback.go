package main

import "net"

// isLoopback reports whether host only accepts connections from this machine. Names
// other than localhost count as reachable from elsewhere.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
