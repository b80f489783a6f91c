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
	for _, k := range []string{"listen", "port", "authorization", "accounts", "jetstream", "cluster", "server_name", "tls"} {
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
	return fmt.Sprintf("broker (nats-server config) on %s, %d users, %s",
		net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)), users, tls), nil
}
