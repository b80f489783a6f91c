package site

import (
	"net"
	"os"
	"regexp"
	"slices"

	"github.com/chiffon-dev/chiffon/broker"
)

// IsLoopback reports whether host only accepts connections from this machine. Names
// other than localhost count as reachable from elsewhere.
func IsLoopback(host string) bool { return broker.IsLoopback(host) }

// IsWildcard reports whether host, as a listen address, means every address of
// this machine: "", 0.0.0.0 or ::.
func IsWildcard(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}

// ListenNames are the names and addresses other hosts reach a listener on host by,
// for its certificate: host itself, or for a wildcard address this machine's name
// and the addresses of its interfaces, IPv4 first, leaving out loopback and
// link-local ones. (Certificates name localhost and 127.0.0.1 in any case.)
func ListenNames(host string) []string {
	if !IsWildcard(host) {
		return []string{host}
	}
	var names []string
	if h, err := os.Hostname(); err == nil && hostnameRE.MatchString(h) {
		names = append(names, h)
	}
	return append(names, interfaceAddrs()...)
}

var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]*$`)

// interfaceAddrs are this machine's addresses that another host may reach: global
// unicast ones (private ranges included), IPv4 first.
func interfaceAddrs() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var v4, v6 []string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || !n.IP.IsGlobalUnicast() {
			continue
		}
		if n.IP.To4() != nil {
			v4 = append(v4, n.IP.String())
		} else {
			v6 = append(v6, n.IP.String())
		}
	}
	return slices.Concat(v4, v6)
}

// AdvertisedHost is the host to give other hosts for a listener on host: host
// itself, or for a wildcard address the first of ListenNames' addresses (an
// address reaches further than a name a LAN may not resolve), else its name.
func AdvertisedHost(host string) string {
	if !IsWildcard(host) {
		return host
	}
	names := ListenNames(host)
	for _, n := range names {
		if net.ParseIP(n) != nil {
			return n
		}
	}
	if len(names) > 0 {
		return names[0]
	}
	return "127.0.0.1"
}
