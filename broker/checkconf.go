package broker

import (
	"fmt"
	"net"
	"strconv"

	"github.com/nats-io/nats-server/v2/conf"
	"github.com/nats-io/nats-server/v2/server"
)

// LooksLikeServerFile reports whether path is a nats-server config file, such as
// the broker.conf chiffon init writes: it parses in that format and sets a key
// only a server's config has, whatever the values.
func LooksLikeServerFile(path string) bool {
	m, err := conf.ParseFile(path)
	if err != nil {
		return false
	}
	for _, k := range []string{"listen", "port", "authorization", "accounts", "jetstream", "cluster", "server_name", "tls", "websocket"} {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// CheckServerFile reads path as `chiffon broker --config` does, with the files it
// names (TLS certificates), and describes what the broker would run: where it
// listens, how many users and whether it speaks TLS.
func CheckServerFile(path string) (string, error) {
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		return "", err
	}
	users := len(opts.Nkeys) + len(opts.Users)
	tls := "no TLS"
	if opts.TLSConfig != nil {
		tls = "TLS"
	}
	ws, err := describeWebsocket(opts)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("broker (nats-server config) on %s, %d users, %s%s",
		net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)), users, tls, ws), nil
}

// describeWebsocket describes the WebSocket listener of opts, if any, and refuses
// one nats-server would refuse at start, or one without TLS beyond loopback.
func describeWebsocket(opts *server.Options) (string, error) {
	w := opts.Websocket
	if w.Port == 0 {
		return "", nil
	}
	addr := net.JoinHostPort(w.Host, strconv.Itoa(w.Port))
	switch {
	case w.TLSConfig != nil:
		return ", WebSocket on " + addr + " with TLS", nil
	case !w.NoTLS:
		return "", fmt.Errorf("websocket on %s has no tls block (nats-server refuses it)", addr)
	case !IsLoopback(w.Host):
		return "", fmt.Errorf("websocket on %s has no TLS beyond loopback: every message, tokens included, would cross the network in the clear", addr)
	}
	return ", WebSocket on " + addr + " without TLS (loopback, behind a proxy)", nil
}
