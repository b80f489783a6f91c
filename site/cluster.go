package site

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"

	"github.com/chiffon-dev/chiffon/broker"
)

// HA is what a site for high availability adds: a NATS cluster of three nodes
// and a group of orchestrators sharing their tasks in its JetStream. Its
// fields are chiffon init's flags of --ha.
type HA struct {
	// Orchestrators is how many orchestrators the group has: 2 or 3
	// (--orchestrators).
	Orchestrators int
	// Routes are the nodes' route URLs, in the order of Options.NATS; none
	// means port 6222 of each NATS URL's host (--cluster-routes).
	Routes []string
	// OrchestratorHosts are where the orchestrators run, in order; none means
	// the hosts of the first NATS URLs, one beside each node
	// (--orchestrator-host).
	OrchestratorHosts []string
	// Group is the orchestrators' shared id (--group).
	Group string
}

// Settings of the cluster and the group that a site for HA has.
const (
	haNodes       = 3
	haClusterName = "chiffon"
	haRoutePort   = "6222"
	haLease       = "20s"
)

// check refuses a cluster of other than three nodes, a group of other than two
// or three, and lists of the wrong length.
func (h *HA) check(natsURLs []string) error {
	if len(natsURLs) != haNodes {
		return fmt.Errorf("--ha needs %d --nats URLs, one per node of the cluster; got %d", haNodes, len(natsURLs))
	}
	if h.Orchestrators != 2 && h.Orchestrators != 3 {
		return fmt.Errorf("--orchestrators must be 2 or 3, got %d", h.Orchestrators)
	}
	if len(h.Routes) != 0 && len(h.Routes) != haNodes {
		return fmt.Errorf("--cluster-routes needs %d URLs, one per node in the order of --nats; got %d", haNodes, len(h.Routes))
	}
	if len(h.OrchestratorHosts) != 0 && len(h.OrchestratorHosts) != h.Orchestrators {
		return fmt.Errorf("--orchestrator-host needs %d hosts, one per orchestrator; got %d", h.Orchestrators, len(h.OrchestratorHosts))
	}
	if h.Group == "" {
		return errors.New("--group must not be empty")
	}
	return nil
}

// ClusterNode is one node of a site's cluster and where it listens.
type ClusterNode struct {
	Node
	// ClientListen and RouteListen are the addresses it listens on for
	// clients and for the other nodes' routes.
	ClientListen, RouteListen string
	// RouteAdvertise is the host and port of the node's route URL, which its
	// certificate names.
	RouteAdvertise string
	// Routes are the other nodes' route URLs.
	Routes []string
}

// clusterNodes lays out the three nodes: node i listens for clients on the port
// of NATS URL i and for routes on the port of route URL i, both on the host of
// BrokerListen, and its certificate names the hosts of both URLs.
func (o Options) clusterNodes() ([]ClusterNode, error) {
	listenHost, _, err := net.SplitHostPort(o.BrokerListen)
	if err != nil {
		return nil, fmt.Errorf("--broker-listen %q: %v", o.BrokerListen, err)
	}
	routes := o.HA.Routes
	if len(routes) == 0 {
		for _, raw := range o.NATS {
			u, err := hostURL("--nats", raw, "4222")
			if err != nil {
				return nil, err
			}
			routes = append(routes, "nats-route://"+net.JoinHostPort(u.Hostname(), haRoutePort))
		}
	}
	nodes := make([]ClusterNode, haNodes)
	for i := range nodes {
		client, err := hostURL("--nats", o.NATS[i], "4222")
		if err != nil {
			return nil, err
		}
		route, err := hostURL("--cluster-routes", routes[i], haRoutePort)
		if err != nil {
			return nil, err
		}
		n := &nodes[i]
		n.Name = "broker-" + strconv.Itoa(i+1)
		n.Hosts = []string{client.Hostname()}
		if route.Hostname() != client.Hostname() {
			n.Hosts = append(n.Hosts, route.Hostname())
		}
		n.ClientListen = net.JoinHostPort(listenHost, client.Port())
		n.RouteListen = net.JoinHostPort(listenHost, route.Port())
		n.RouteAdvertise = route.Host
		for j, r := range routes {
			if j != i {
				n.Routes = append(n.Routes, r)
			}
		}
	}
	return nodes, nil
}

// hostURL parses a URL that must name a host, giving it defaultPort when it has
// none.
func hostURL(flag, raw, defaultPort string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("%s %q: not a URL such as nats://nas.lan:4222", flag, raw)
	}
	if u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), defaultPort)
	}
	return u, nil
}

// orchestratorHosts are where the group's orchestrators run:
// HA.OrchestratorHosts, or the hosts of the first NATS URLs, an orchestrator
// beside each node.
func (o Options) orchestratorHosts() ([]string, error) {
	if len(o.HA.OrchestratorHosts) > 0 {
		return o.HA.OrchestratorHosts, nil
	}
	hosts := make([]string, o.HA.Orchestrators)
	for i := range hosts {
		u, err := hostURL("--nats", o.NATS[i], "4222")
		if err != nil {
			return nil, err
		}
		hosts[i] = u.Hostname()
	}
	return hosts, nil
}

// nodeFile is node n's config: the site's users and client TLS with the node's
// certificate, JetStream in its own store dir under dataRoot, and routes to the
// other nodes over TLS verified both ways against the site CA. The nodes
// advertise their route URLs' hosts, and no client addresses: every daemon has
// the three URLs, and the IPs a node would announce are not in its certificate.
func (s *Secrets) nodeFile(n ClusterNode, hostDir, dataRoot string) broker.ServerFile {
	tlsFiles := broker.ServerTLS{CertFile: filepath.Join(hostDir, n.Name+".pem"), KeyFile: filepath.Join(hostDir, n.Name+"-key.pem"),
		CAFile: filepath.Join(hostDir, CA)}
	client := tlsFiles
	client.Verify = s.spec.MutualTLS
	route := tlsFiles
	route.Verify = true
	return s.WithOperator(broker.ServerFile{
		Listen: n.ClientListen, Users: s.users(), TLS: &client,
		ServerName: n.Name, JetStream: true, StoreDir: filepath.Join(dataRoot, n.Name, "jetstream"),
		Cluster: &broker.ClusterFile{Name: haClusterName, Listen: n.RouteListen, Advertise: n.RouteAdvertise, NoAdvertise: true,
			Routes: n.Routes, TLS: route},
	}, filepath.Join(dataRoot, n.Name, "jwt"))
}

// haEdits make an orchestrator config a member of group: the shared id, the
// tasks in JetStream on 3 replicas, and leadership with advertise as its API's
// address.
func haEdits(group, advertise string) []yamlEdit {
	return []yamlEdit{
		{group, []string{"id"}},
		{"jetstream", []string{"store", "kind"}},
		{haNodes, []string{"store", "jetstream", "replicas"}},
		{true, []string{"ha", "enabled"}},
		{haLease, []string{"ha", "lease"}},
		{advertise, []string{"ha", "advertise_url"}},
	}
}
