package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"

	"github.com/chiffon-dev/chiffon/broker"
)

// haOptions are what `chiffon init --ha` adds: a NATS cluster of three nodes and
// a group of orchestrators sharing their tasks in its JetStream.
type haOptions struct {
	enabled       bool
	orchestrators int
	// routes are the nodes' route URLs, in the order of --nats.
	routes []string
	// orchHosts are where the orchestrators run, in order.
	orchHosts []string
	// group is the orchestrators' shared id.
	group string
}

// Settings of the cluster and the group that init --ha writes.
const (
	haNodes       = 3
	haClusterName = "chiffon"
	haRoutePort   = "6222"
	haLease       = "5s"
)

// haFlags are the flags that mean something only with --ha.
var haFlags = []string{"orchestrators", "cluster-routes", "orchestrator-host", "group"}

// checkHAFlags refuses the flags of --ha without it, --broker-host with it, and a
// cluster of other than three nodes or a group of other than two or three.
func (o initOptions) checkHAFlags(changed func(string) bool) error {
	if !o.ha.enabled {
		for _, f := range haFlags {
			if changed(f) {
				return fmt.Errorf("--%s needs --ha", f)
			}
		}
		return nil
	}
	if changed("broker-host") {
		// Its names would be in no certificate: each node's names the hosts of its URLs.
		return errors.New("--broker-host does not go with --ha: node N's certificate names the hosts of --nats and --cluster-routes URL N")
	}
	if len(o.nats) != haNodes {
		return fmt.Errorf("--ha needs %d --nats URLs, one per node of the cluster; got %d", haNodes, len(o.nats))
	}
	if o.ha.orchestrators != 2 && o.ha.orchestrators != 3 {
		return fmt.Errorf("--orchestrators must be 2 or 3, got %d", o.ha.orchestrators)
	}
	if len(o.ha.routes) != 0 && len(o.ha.routes) != haNodes {
		return fmt.Errorf("--cluster-routes needs %d URLs, one per node in the order of --nats; got %d", haNodes, len(o.ha.routes))
	}
	if len(o.ha.orchHosts) != 0 && len(o.ha.orchHosts) != o.ha.orchestrators {
		return fmt.Errorf("--orchestrator-host needs %d hosts, one per orchestrator; got %d", o.ha.orchestrators, len(o.ha.orchHosts))
	}
	if o.ha.group == "" {
		return errors.New("--group must not be empty")
	}
	return nil
}

// clusterNode is one node of the cluster init --ha writes.
type clusterNode struct {
	siteNode
	clientListen, routeListen string
	// routeAdvertise is the host and port of the node's route URL, which its
	// certificate names.
	routeAdvertise string
	// routes are the other nodes' route URLs.
	routes []string
}

// clusterNodes lays out the three nodes: node i listens for clients on the port
// of --nats URL i and for routes on the port of route URL i, both on the host of
// --broker-listen, and its certificate names the hosts of both URLs.
func (o initOptions) clusterNodes() ([]clusterNode, error) {
	listenHost, _, err := net.SplitHostPort(o.brokerListen)
	if err != nil {
		return nil, fmt.Errorf("--broker-listen %q: %v", o.brokerListen, err)
	}
	routes := o.ha.routes
	if len(routes) == 0 {
		for _, raw := range o.nats {
			u, err := hostURL("--nats", raw, "4222")
			if err != nil {
				return nil, err
			}
			routes = append(routes, "nats-route://"+net.JoinHostPort(u.Hostname(), haRoutePort))
		}
	}
	nodes := make([]clusterNode, haNodes)
	for i := range nodes {
		client, err := hostURL("--nats", o.nats[i], "4222")
		if err != nil {
			return nil, err
		}
		route, err := hostURL("--cluster-routes", routes[i], haRoutePort)
		if err != nil {
			return nil, err
		}
		n := &nodes[i]
		n.name = "broker-" + strconv.Itoa(i+1)
		n.hosts = []string{client.Hostname()}
		if route.Hostname() != client.Hostname() {
			n.hosts = append(n.hosts, route.Hostname())
		}
		n.clientListen = net.JoinHostPort(listenHost, client.Port())
		n.routeListen = net.JoinHostPort(listenHost, route.Port())
		n.routeAdvertise = route.Host
		for j, r := range routes {
			if j != i {
				n.routes = append(n.routes, r)
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

// orchestratorHosts are where the group's orchestrators run: --orchestrator-host,
// or the hosts of the first --nats URLs, an orchestrator beside each node.
func (o initOptions) orchestratorHosts() ([]string, error) {
	if len(o.ha.orchHosts) > 0 {
		return o.ha.orchHosts, nil
	}
	hosts := make([]string, o.ha.orchestrators)
	for i := range hosts {
		u, err := hostURL("--nats", o.nats[i], "4222")
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
func (s *site) nodeFile(n clusterNode, hostDir, dataRoot string) broker.ServerFile {
	tlsFiles := broker.ServerTLS{CertFile: filepath.Join(hostDir, n.name+".pem"), KeyFile: filepath.Join(hostDir, n.name+"-key.pem"),
		CAFile: filepath.Join(hostDir, siteCA)}
	client := tlsFiles
	client.Verify = s.spec.mutualTLS
	route := tlsFiles
	route.Verify = true
	return broker.ServerFile{
		Listen: n.clientListen, Users: s.users(), TLS: &client,
		ServerName: n.name, JetStream: true, StoreDir: filepath.Join(dataRoot, n.name, "jetstream"),
		Cluster: &broker.ClusterFile{Name: haClusterName, Listen: n.routeListen, Advertise: n.routeAdvertise, NoAdvertise: true,
			Routes: n.routes, TLS: route},
	}
}

// haEdits make orchestrator config a member of the group: the shared id, the
// tasks in JetStream on 3 replicas, and leadership with advertise as its API's
// address.
func (o initOptions) haEdits(advertise string) []yamlEdit {
	return []yamlEdit{
		{o.ha.group, []string{"id"}},
		{"jetstream", []string{"store", "kind"}},
		{haNodes, []string{"store", "jetstream", "replicas"}},
		{true, []string{"ha", "enabled"}},
		{haLease, []string{"ha", "lease"}},
		{advertise, []string{"ha", "advertise_url"}},
	}
}
