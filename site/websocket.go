package site

import (
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/chiffon-dev/chiffon/broker"
)

// Websocket is what a WebSocket listener on the broker adds to a site: a port for
// daemons beyond the LAN, which dial it with wss:// URLs, as the same identities
// over the same TLS (chiffon init --websocket).
type Websocket struct {
	// Listen is where it listens, "[host:]port": one address for the broker, or
	// with HA one for every node or one per node in the order of NATS. A port
	// alone listens on the host of BrokerListen (--websocket).
	Listen []string
	// Hosts are the names and addresses the daemons beyond the LAN dial: they are
	// added to the broker's, or every node's, certificate (--websocket-host).
	Hosts []string
	// NoTLS serves it without TLS, for a reverse proxy on the same host that
	// ends TLS with the broker's certificate; every Listen must then be on
	// loopback (--websocket-no-tls).
	NoTLS bool
}

// DefaultWebsocketPort is the WebSocket port the docs suggest: the usual
// unprivileged stand-in for 443, which the broker, running as an ordinary user,
// cannot bind, and which a web server or proxy on the host often holds.
const DefaultWebsocketPort = 8443

// websocketListens are the addresses of the WebSocket listener of each broker:
// one, or with HA one per node.
func (o Options) websocketListens() ([]string, error) {
	w := o.Websocket
	brokers := 1
	if o.HA != nil {
		brokers = haNodes
	}
	if len(w.Listen) != 1 && len(w.Listen) != brokers {
		if o.HA != nil {
			return nil, fmt.Errorf("--websocket needs one address for every node or %d, one per node; got %d", haNodes, len(w.Listen))
		}
		return nil, fmt.Errorf("--websocket needs one address; got %d", len(w.Listen))
	}
	defaultHost, _, err := net.SplitHostPort(o.BrokerListen)
	if err != nil {
		return nil, fmt.Errorf("--broker-listen %q: %v", o.BrokerListen, err)
	}
	out := make([]string, brokers)
	for i := range out {
		raw := w.Listen[min(i, len(w.Listen)-1)]
		host, port, err := net.SplitHostPort(raw)
		if err != nil {
			host, port = defaultHost, raw // a port alone
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("--websocket %q: not a port or host:port", raw)
		}
		if w.NoTLS && !IsLoopback(host) {
			return nil, fmt.Errorf("--websocket-no-tls: %s is beyond loopback; without TLS listen on 127.0.0.1, behind a proxy on the same host that ends TLS", net.JoinHostPort(host, port))
		}
		out[i] = net.JoinHostPort(host, port)
	}
	return out, nil
}

// layoutWebsocket works out each broker's WebSocket address and adds the names
// the daemons beyond the LAN dial to the broker's, or every node's, certificate.
func (l *Layout) layoutWebsocket() error {
	if l.Websocket == nil {
		return nil
	}
	var err error
	if l.WebsocketListens, err = l.websocketListens(); err != nil {
		return err
	}
	if l.Nodes == nil {
		l.Spec.BrokerHosts = addHosts(l.Spec.BrokerHosts, l.Websocket.Hosts)
	}
	for i := range l.Nodes {
		l.Nodes[i].Hosts = addHosts(l.Nodes[i].Hosts, l.Websocket.Hosts)
		l.Spec.Nodes[i].Hosts = l.Nodes[i].Hosts
	}
	return nil
}

// addHosts is hosts followed by those of more it lacks, in a new slice.
func addHosts(hosts, more []string) []string {
	out := slices.Clone(hosts)
	for _, h := range more {
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// websocketFile is the websocket block of broker i (0 for a single broker): the
// client port's certificate, CA and client verification, or no TLS behind a
// proxy. It is nil for a site without WebSocket.
func (l *Layout) websocketFile(i int, clientTLS *broker.ServerTLS) *broker.WebsocketFile {
	if l.Websocket == nil {
		return nil
	}
	w := &broker.WebsocketFile{Listen: l.WebsocketListens[i], NoTLS: l.Websocket.NoTLS}
	if !w.NoTLS {
		t := *clientTLS
		w.TLS = &t
	}
	return w
}
