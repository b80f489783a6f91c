package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/spf13/cobra"
)

// initOptions say what `chiffon init` writes and what the configs it writes point at.
type initOptions struct {
	dir          string
	agents       []string
	clients      []string
	nats         []string
	listen       string
	secretsDir   string
	dataRoot     string
	brokerHosts  []string
	brokerListen string
	apiHosts     []string
	mutualTLS    bool
	force        bool
	ha           haOptions
}

// newInitCmd is `chiffon init`.
func newInitCmd() *cobra.Command {
	var o initOptions
	cmd := &cobra.Command{
		Use:   "init --dir D [--agents infra,desktop] [--broker-host nas.lan]",
		Short: "Write a secure multi-host site: configs, NATS identities, TLS and tokens",
		Long: `Writes, under --dir:
  broker.conf             the broker's config, in nats-server's syntax: one NKey user
                          per daemon with only the subjects it needs, TLS, no
                          anonymous access (chiffon broker --config, or nats-server -c)
  orchestrator.yaml       the orchestrator's config, with every agent below bound to
                          its type
  agents/<id>.yaml        one config per agent, from the example of its type
  clients/<name>.txt      how a client identity (--client) connects
  secrets/                tokens, NKey seeds (0600), the site CA and the broker's
                          certificate for the names of --broker-host

With --ha, for a NATS cluster of three nodes and two or three (--orchestrators)
orchestrators that share their tasks in its JetStream (one leads, the others
stand by), instead of broker.conf and orchestrator.yaml:
  broker-1.conf ..        each node's config: the same users and TLS, its own
  broker-3.conf           certificate (secrets/broker-N.pem) for the hosts of --nats
                          and --cluster-routes URL N, JetStream, and routes to the
                          other nodes over TLS that both sides verify against the
                          site CA: a server without a certificate of it cannot join
  orchestrator-1.yaml ..  the group's orchestrators: the same id (--group), tasks in
                          JetStream on 3 replicas, ha enabled; orchestrator N runs on
                          the host of --nats URL N unless --orchestrator-host says
--ha takes exactly three --nats URLs, node N's client URL being URL N, and every
config lists the three; it takes no --broker-host.

--agents lists agent types (each gets the id <type>-1), or type=id pairs such as
infra=nas-infra. --client NAME makes an identity for a script that commands agents
directly with another NATS client; NAME=id,id limits it to those agents. The configs
name the secret files under --secrets-dir and the data dirs under --data-root: where
they will be on the hosts. Existing secrets are kept; existing configs are only
replaced with --force.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkHAFlags(cmd.Flags().Changed); err != nil {
				return usagef(err.Error())
			}
			agents, err := parseInitAgents(o.agents)
			if err != nil {
				return usagef("--agents: " + err.Error())
			}
			clients, err := parseInitClients(o.clients, agents)
			if err != nil {
				return usagef("--client: " + err.Error())
			}
			if o.secretsDir == "" {
				abs, err := filepath.Abs(filepath.Join(o.dir, "secrets"))
				if err != nil {
					return err
				}
				o.secretsDir = abs
			}
			return writeInit(cmd.OutOrStdout(), o, agents, clients)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "directory to write into")
	f.StringSliceVar(&o.agents, "agents", []string{"infra", "desktop", "code", "research"}, "agent types, or type=id pairs")
	f.StringArrayVar(&o.clients, "client", nil, "a client identity NAME, or NAME=id,id to limit the agents it may command (repeatable)")
	f.StringSliceVar(&o.nats, "nats", []string{"nats://127.0.0.1:4222"}, "NATS URLs the daemons connect to")
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address of the orchestrator's HTTP API")
	f.StringVar(&o.secretsDir, "secrets-dir", "", "where the secret files will be on the hosts (default: <dir>/secrets)")
	f.StringVar(&o.secretsDir, "token-dir", "", "old name of --secrets-dir")
	_ = f.MarkHidden("token-dir")
	f.StringVar(&o.dataRoot, "data-root", "/var/lib/chiffon", "parent of every daemon's data dir on the hosts")
	f.StringSliceVar(&o.brokerHosts, "broker-host", nil, "names and IPs of the broker in its TLS certificate (default: the hosts of --nats)")
	f.StringVar(&o.brokerListen, "broker-listen", "0.0.0.0:4222", "address the broker listens on (broker.conf); with --ha, the host every node listens on")
	f.StringSliceVar(&o.apiHosts, "api-host", nil, "names and IPs of the orchestrator in its HTTP API's certificate, when --listen is beyond loopback (default: the host of --listen, else --broker-host's); with --ha every orchestrator's host is added")
	f.BoolVar(&o.mutualTLS, "mutual-tls", false, "require a client certificate from every daemon as well as its NKey")
	f.BoolVar(&o.force, "force", false, "replace existing config files")
	f.BoolVar(&o.ha.enabled, "ha", false, "a three-node NATS cluster (one --nats URL per node) and a group of orchestrators sharing their tasks in its JetStream")
	f.IntVar(&o.ha.orchestrators, "orchestrators", 2, "with --ha: how many orchestrators, 2 or 3")
	f.StringSliceVar(&o.ha.routes, "cluster-routes", nil, "with --ha: the nodes' route URLs, in the order of --nats (default: port 6222 of each --nats host)")
	f.StringSliceVar(&o.ha.orchHosts, "orchestrator-host", nil, "with --ha: the host of each orchestrator, for its advertised API address and certificate (default: the hosts of the first --nats URLs)")
	f.StringVar(&o.ha.group, "group", "main", "with --ha: the orchestrators' shared id")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

func parseInitAgents(specs []string) ([]siteAgent, error) {
	var out []siteAgent
	seen := map[string]bool{}
	for _, s := range specs {
		typ, id, ok := strings.Cut(strings.TrimSpace(s), "=")
		if !ok {
			id = typ + "-1"
		}
		if t := envelope.AgentType(typ); !t.Valid() || t == envelope.Orchestrator {
			return nil, fmt.Errorf("%q is not an agent type (infra, desktop, code, research)", typ)
		}
		if msg := envelope.CheckAgentID(id); msg != "" {
			return nil, fmt.Errorf("agent id %q %s", id, msg)
		}
		if seen[id] {
			return nil, fmt.Errorf("agent id %q given twice", id)
		}
		seen[id] = true
		out = append(out, siteAgent{typ: typ, id: id})
	}
	if len(out) == 0 {
		return nil, errors.New("name at least one agent")
	}
	return out, nil
}

// parseInitClients reads --client values: NAME, or NAME=id,id.
func parseInitClients(specs []string, agents []siteAgent) ([]siteClient, error) {
	known := map[string]bool{}
	for _, a := range agents {
		known[a.id] = true
	}
	var out []siteClient
	seen := map[string]bool{}
	for _, s := range specs {
		name, ids, limited := strings.Cut(strings.TrimSpace(s), "=")
		if msg := envelope.CheckAgentID(name); msg != "" {
			return nil, fmt.Errorf("client name %q %s", name, msg)
		}
		if seen[name] {
			return nil, fmt.Errorf("client %q given twice", name)
		}
		seen[name] = true
		c := siteClient{name: name, agents: agentIDs(agents)}
		if limited {
			c.agents = nil
			for _, id := range strings.Split(ids, ",") {
				if id = strings.TrimSpace(id); !known[id] {
					return nil, fmt.Errorf("client %q: %q is not an agent of --agents", name, id)
				}
				c.agents = append(c.agents, id)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// brokerHosts are the names in the broker's certificate: --broker-host, or the
// hosts of the NATS URLs.
func (o initOptions) brokerHostNames() ([]string, error) {
	if len(o.brokerHosts) > 0 {
		return o.brokerHosts, nil
	}
	var hosts []string
	for _, raw := range o.nats {
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" {
			return nil, fmt.Errorf("--nats %q: not a URL such as nats://nas.lan:4222", raw)
		}
		hosts = append(hosts, u.Hostname())
	}
	return hosts, nil
}

// initOrch is one orchestrator config that init writes.
type initOrch struct {
	file, dataDir string
	// advertise is a group member's API address, its ha.advertise_url.
	advertise string
	// edits are added to every orchestrator's: a group member's.
	edits []yamlEdit
}

func writeInit(w io.Writer, o initOptions, agents []siteAgent, clients []siteClient) error {
	hosts, err := o.brokerHostNames()
	if err != nil {
		return usagef(err.Error())
	}
	var nodes []clusterNode
	orchs := []initOrch{{file: "orchestrator.yaml", dataDir: filepath.Join(o.dataRoot, "orchestrator")}}
	apiFallback := hosts // an orchestrator often runs beside the broker
	if o.ha.enabled {
		if nodes, err = o.clusterNodes(); err != nil {
			return usagef(err.Error())
		}
		if apiFallback, err = o.orchestratorHosts(); err != nil {
			return usagef(err.Error())
		}
		orchs = orchs[:0]
		for i := range o.ha.orchestrators {
			name := "orchestrator-" + strconv.Itoa(i+1)
			orchs = append(orchs, initOrch{file: name + ".yaml", dataDir: filepath.Join(o.dataRoot, name)})
		}
	}
	brokerFiles := []string{"broker.conf"}
	if nodes != nil {
		brokerFiles = brokerFiles[:0]
		for _, n := range nodes {
			brokerFiles = append(brokerFiles, n.name+".conf")
		}
	}
	// Refuse before anything is made: a new NKey without the broker config that
	// lists it would lock its daemon out.
	var targets []string
	for _, f := range brokerFiles {
		targets = append(targets, filepath.Join(o.dir, f))
	}
	for _, orch := range orchs {
		targets = append(targets, filepath.Join(o.dir, orch.file))
	}
	for _, a := range agents {
		targets = append(targets, filepath.Join(o.dir, "agents", a.id+".yaml"))
	}
	for _, c := range clients {
		targets = append(targets, filepath.Join(o.dir, "clients", c.name+".txt"))
	}
	for _, path := range targets {
		if err := refuseOverwrite(path, o.force); err != nil {
			return err
		}
	}
	for _, d := range []string{"agents", "clients"} {
		if err := os.MkdirAll(filepath.Join(o.dir, d), 0o755); err != nil {
			return err
		}
	}
	apiHosts, err := o.apiHostNames(apiFallback)
	if err != nil {
		return usagef(err.Error())
	}
	if o.ha.enabled && apiHosts != nil {
		// Each orchestrator of the group serves the API with the same certificate.
		apiHosts = append(slices.Clip(apiHosts), apiFallback...)
	}
	spec := siteSpec{agents: agents, clients: clients, brokerHosts: hosts, apiHosts: apiHosts, mutualTLS: o.mutualTLS}
	for _, n := range nodes {
		spec.nodes = append(spec.nodes, n.siteNode)
	}
	if o.ha.enabled {
		for _, orch := range orchs {
			spec.orchestrators = append(spec.orchestrators, strings.TrimSuffix(orch.file, ".yaml"))
		}
	}
	st, err := ensureSite(filepath.Join(o.dir, "secrets"), spec)
	if err != nil {
		return err
	}
	if nodes == nil {
		if err := broker.WriteServerFile(filepath.Join(o.dir, "broker.conf"), st.brokerFile(o.secretsDir, o.brokerListen)); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		if err := broker.WriteServerFile(filepath.Join(o.dir, n.name+".conf"), st.nodeFile(n, o.secretsDir, o.dataRoot)); err != nil {
			return err
		}
	}
	allowed, err := writeAgentConfigs(o, st, agents)
	if err != nil {
		return err
	}
	if o.ha.enabled {
		_, port, err := net.SplitHostPort(o.listen)
		if err != nil {
			return usagef(fmt.Sprintf("--listen %q: %v", o.listen, err))
		}
		scheme := "http"
		if apiHosts != nil {
			scheme = "https"
		}
		for i := range orchs {
			orchs[i].advertise = scheme + "://" + net.JoinHostPort(apiFallback[i], port)
			orchs[i].edits = append(o.haEdits(orchs[i].advertise),
				yamlEdit{storeIdentity(st.natsConfig(storeID, nil, o.secretsDir)), []string{"store", "jetstream", "nats"}})
		}
	}
	for _, orch := range orchs {
		if err := writeOrchConfig(o, st, orch, allowed); err != nil {
			return err
		}
	}
	for _, c := range clients {
		if err := writeClientNotes(o, st, c); err != nil {
			return err
		}
	}
	printInitSummary(w, o, st, nodes, orchs)
	return nil
}

// apiHostNames are the names in the HTTP API's certificate, or nil when the API
// listens on loopback only and its token never crosses a network: --api-host, or
// the host of --listen, or (listening on every address) fallback: the broker's
// names, or with --ha the orchestrators' hosts.
func (o initOptions) apiHostNames(fallback []string) ([]string, error) {
	host, _, err := net.SplitHostPort(o.listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: %v", o.listen, err)
	}
	if isLoopback(host) && len(o.apiHosts) == 0 {
		return nil, nil
	}
	switch ip := net.ParseIP(host); {
	case len(o.apiHosts) > 0:
		return o.apiHosts, nil
	case host != "" && (ip == nil || !ip.IsUnspecified()):
		return []string{host}, nil
	}
	return fallback, nil
}

func agentIDs(agents []siteAgent) []string {
	ids := make([]string, len(agents))
	for i, a := range agents {
		ids[i] = a.id
	}
	return ids
}

func printInitSummary(w io.Writer, o initOptions, st *site, nodes []clusterNode, orchs []initOrch) {
	fmt.Fprintf(w, "Wrote %s:\n", o.dir)
	if nodes == nil {
		fmt.Fprintf(w, "  broker.conf             the broker (%s): NKey users, TLS, least privilege\n", o.brokerListen)
	}
	for _, n := range nodes {
		fmt.Fprintf(w, "  %-23s node %s of the cluster, on %s (clients %s, routes %s over verified TLS), JetStream\n",
			n.name+".conf", strings.TrimPrefix(n.name, "broker-"), n.hosts[0], n.clientListen, n.routeListen)
	}
	scheme, ca := "http", ""
	if st.spec.apiHosts != nil {
		scheme, ca = "https", fmt.Sprintf("; clients trust it with --api-ca-file %s", filepath.Join(o.dir, "secrets", siteCA))
	}
	for _, orch := range orchs {
		if orch.advertise == "" {
			fmt.Fprintf(w, "  %-23s orchestrator (API %s://%s%s)\n", orch.file, scheme, o.listen, ca)
			continue
		}
		fmt.Fprintf(w, "  %-23s member of group %s, tasks in JetStream on 3 replicas (API %s, listening on %s%s)\n",
			orch.file, o.ha.group, orch.advertise, o.listen, ca)
	}
	for _, a := range st.spec.agents {
		fmt.Fprintf(w, "  agents/%-16s %s agent\n", a.id+".yaml", a.typ)
	}
	for _, c := range st.spec.clients {
		fmt.Fprintf(w, "  clients/%-15s client %s\n", c.name+".txt", c.name)
	}
	fmt.Fprintf(w, "Copy to each host's %s only the files it needs (all 0600 but the certificates):\n", o.secretsDir)
	for _, row := range st.hostFiles() {
		fmt.Fprintf(w, "  %-22s %s\n", row[0]+":", row[1])
	}
	fmt.Fprintln(w, "Keep secrets/ca-key.pem off every host: it signs certificates.")
	if o.ha.enabled {
		fmt.Fprintln(w, "Then run chiffon broker --config broker-N.conf on each node's host, and once the three have")
		fmt.Fprintln(w, "started, chiffon orchestrator --config orchestrator-N.yaml on each orchestrator's host;")
	} else {
		fmt.Fprintln(w, "Then run: chiffon broker --config broker.conf; chiffon orchestrator --config orchestrator.yaml;")
	}
	fmt.Fprintln(w, "and chiffon agent --config <id>.yaml on each agent host.")
}
