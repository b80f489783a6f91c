package broker

import (
	"log/slog"
	"net"
	"net/url"
	"strings"

	"github.com/nats-io/nats.go"
)

// IsLoopback reports whether host only accepts connections from this machine. Names
// other than localhost count as reachable from elsewhere.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// The two ways a daemon's connection to a broker beyond loopback is open to
// anyone on the network, as warnExposure names them.
const (
	riskNoIdentity = "it connects without a NATS identity (nkey_file or creds_file), so the broker lets anyone on the network connect and read every message, tokens included"
	riskNoTLS      = "the connection has no TLS: every message, tokens included, crosses the network in the clear"
)

// exposure returns what a connection to host leaves open: nothing on
// loopback; beyond it, a connection without an identity, and one known
// (encrypted false, known true) to run without TLS.
func exposure(host string, identified, encrypted, known bool) []string {
	if host == "" || IsLoopback(host) {
		return nil
	}
	var risks []string
	if !identified {
		risks = append(risks, riskNoIdentity)
	}
	if known && !encrypted {
		risks = append(risks, riskNoTLS)
	}
	return risks
}

// warnExposure logs, at every start of a daemon, each way its connection nc
// (made as cfg says) is open to the network, with what fixes it. While nc is
// not connected yet it judges by the first URL, and TLS is not known but for a
// ws:// URL without TLS settings.
func warnExposure(cfg ConnConfig, nc *nats.Conn, log *slog.Logger) {
	raw, known, encrypted := "", false, false
	if len(cfg.URLs) > 0 {
		raw = cfg.URLs[0]
	}
	if nc.IsConnected() {
		raw, known = nc.ConnectedUrl(), true
		_, err := nc.TLSConnectionState()
		encrypted = err == nil
	} else if cfg.TLS.isZero() && strings.HasPrefix(raw, "ws://") {
		// nats.go speaks plain WebSocket to a ws:// URL unless given TLS settings.
		known = true
	}
	host := raw
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		host = u.Hostname()
	}
	for _, risk := range exposure(host, cfg.NKeyFile != "" || cfg.CredsFile != "", encrypted, known) {
		log.Warn("nats: this connection is open to the network: "+risk, "server", host,
			"fix", "run the site `chiffon init` writes: every daemon gets an NKey and TLS (docs/security.md)")
	}
}
