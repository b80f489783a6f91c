package site

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
)

// Options say what `chiffon init` writes and what the configs it writes point
// at. Each field is one of its flags, and errors name them so.
type Options struct {
	// Dir is where the site is written (--dir).
	Dir string
	// Agents are the site's agents (--agents).
	Agents []Agent
	// Clients are identities for scripts that command agents (--client).
	Clients []Client
	// NATS are the URLs the daemons connect to (--nats).
	NATS []string
	// Listen is the orchestrator's HTTP API address (--listen).
	Listen string
	// SecretsDir is where the secret files will be on the hosts; "" means
	// Dir/secrets, made absolute (--secrets-dir).
	SecretsDir string
	// DataRoot is the parent of every daemon's data dir on the hosts
	// (--data-root).
	DataRoot string
	// BrokerHosts are the names in the broker's certificate; none means the
	// hosts of NATS (--broker-host). HA takes none.
	BrokerHosts []string
	// BrokerListen is the address the broker listens on; with HA, its host is
	// where every node listens (--broker-listen).
	BrokerListen string
	// APIHosts are the names in the HTTP API's certificate when Listen is
	// beyond loopback; none means Listen's host, else (a wildcard) the
	// broker's names or the orchestrators' hosts (--api-host).
	APIHosts []string
	// MutualTLS requires a client certificate from every daemon as well as
	// its NKey (--mutual-tls).
	MutualTLS bool
	// Force replaces existing config files (--force).
	Force bool
	// HA, when set, makes a cluster of three nodes and a group of
	// orchestrators instead of one broker and one orchestrator (--ha).
	HA *HA
	// Websocket, when set, gives the broker (or each node) a WebSocket
	// listener for daemons beyond the LAN (--websocket).
	Websocket *Websocket
	// Operator runs the broker in NATS operator mode, each identity a user
	// JWT the orchestrator may revoke while the broker runs (--operator).
	Operator bool
}

// Layout is what Options make, worked out before anything is written: the
// site's spec and each broker and orchestrator config.
type Layout struct {
	// Options are the options, SecretsDir filled in.
	Options
	// Spec is the site's identities and certificate names.
	Spec Spec
	// Nodes are the cluster's nodes, with HA only.
	Nodes []ClusterNode
	// Orchestrators are the orchestrator configs: one, or a group's.
	Orchestrators []OrchestratorFile
	// WebsocketListens are the WebSocket addresses of the broker, or of each
	// node, with Websocket only.
	WebsocketListens []string
}

// OrchestratorFile is one orchestrator config of a site.
type OrchestratorFile struct {
	// File is its name in Dir: orchestrator.yaml, or orchestrator-<n>.yaml.
	File string
	// DataDir is its data dir on its host.
	DataDir string
	// Listen is its HTTP API's address, http.listen: --listen, or for a
	// second orchestrator on the same host the next free port after it.
	Listen string
	// Advertise is a group member's API URL, its ha.advertise_url; "" alone.
	Advertise string
}

// Layout works out the site of o, writing nothing. Its errors are the
// operator's: an option that cannot make a site.
func (o Options) Layout() (*Layout, error) {
	if o.HA != nil {
		if err := o.HA.check(o.NATS); err != nil {
			return nil, err
		}
	}
	if o.SecretsDir == "" {
		abs, err := filepath.Abs(filepath.Join(o.Dir, "secrets"))
		if err != nil {
			return nil, err
		}
		o.SecretsDir = abs
	}
	hosts, err := o.brokerHostNames()
	if err != nil {
		return nil, err
	}
	l := &Layout{Options: o, Orchestrators: []OrchestratorFile{{File: "orchestrator.yaml", DataDir: filepath.Join(o.DataRoot, "orchestrator")}}}
	apiFallback := hosts // an orchestrator often runs beside the broker
	if o.HA != nil {
		if l.Nodes, err = o.clusterNodes(); err != nil {
			return nil, err
		}
		if apiFallback, err = o.orchestratorHosts(); err != nil {
			return nil, err
		}
	}
	apiHosts, err := o.apiHostNames(apiFallback)
	if err != nil {
		return nil, err
	}
	l.Spec = Spec{Agents: o.Agents, Clients: o.Clients, BrokerHosts: hosts, APIHosts: apiHosts, MutualTLS: o.MutualTLS,
		Operator: o.Operator}
	for _, n := range l.Nodes {
		l.Spec.Nodes = append(l.Spec.Nodes, n.Node)
	}
	if err := l.layoutWebsocket(); err != nil {
		return nil, err
	}
	if o.HA != nil {
		if err := l.layoutGroup(apiFallback); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// layoutGroup makes the orchestrators a group, each on its host with its
// advertised API address, the API's certificate naming every host. The
// orchestrators that share a host listen on ports one apart, from --listen's.
func (l *Layout) layoutGroup(hosts []string) error {
	listenHost, portText, err := net.SplitHostPort(l.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %v", l.Listen, err)
	}
	base, err := strconv.Atoi(portText)
	if err != nil {
		return fmt.Errorf("--listen %q: the port must be a number", l.Listen)
	}
	scheme := "http"
	if l.Spec.APIHosts != nil {
		// Each orchestrator of the group serves the API with the same certificate.
		l.Spec.APIHosts = append(slices.Clip(l.Spec.APIHosts), hosts...)
		scheme = "https"
	}
	l.Orchestrators = l.Orchestrators[:0]
	onHost := map[string]int{}
	for i := range l.HA.Orchestrators {
		name := "orchestrator-" + strconv.Itoa(i+1)
		port := strconv.Itoa(base + onHost[hosts[i]])
		onHost[hosts[i]]++
		l.Spec.Orchestrators = append(l.Spec.Orchestrators, name)
		l.Orchestrators = append(l.Orchestrators, OrchestratorFile{File: name + ".yaml", DataDir: filepath.Join(l.DataRoot, name),
			Listen: net.JoinHostPort(listenHost, port), Advertise: scheme + "://" + net.JoinHostPort(hosts[i], port)})
	}
	return nil
}

// brokerHostNames are the names in the broker's certificate: BrokerHosts, or
// the hosts of the NATS URLs.
func (o Options) brokerHostNames() ([]string, error) {
	if len(o.BrokerHosts) > 0 {
		return o.BrokerHosts, nil
	}
	var hosts []string
	for _, raw := range o.NATS {
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" {
			return nil, fmt.Errorf("--nats %q: not a URL such as nats://nas.lan:4222", raw)
		}
		hosts = append(hosts, u.Hostname())
	}
	return hosts, nil
}

// apiHostNames are the names in the HTTP API's certificate, or nil when the API
// listens on loopback only and its token never crosses a network: APIHosts, or
// the host of Listen, or (listening on every address) fallback: the broker's
// names, or with HA the orchestrators' hosts.
func (o Options) apiHostNames(fallback []string) ([]string, error) {
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: %v", o.Listen, err)
	}
	if IsLoopback(host) && len(o.APIHosts) == 0 {
		return nil, nil
	}
	switch ip := net.ParseIP(host); {
	case len(o.APIHosts) > 0:
		return o.APIHosts, nil
	case host != "" && (ip == nil || !ip.IsUnspecified()):
		return []string{host}, nil
	}
	return fallback, nil
}
