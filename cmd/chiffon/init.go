package main

import (
	"errors"
	"fmt"

	"github.com/chiffon-dev/chiffon/site"
	"github.com/spf13/cobra"
)

// initFlags are `chiffon init`'s flags: site.Options, with the agents and
// clients as given.
type initFlags struct {
	site.Options
	agents, clients []string
	// ha is --ha, and haOpts the flags that go with it.
	ha     bool
	haOpts site.HA
	// ws are the flags of a WebSocket listener (--websocket).
	ws site.Websocket
}

// newInitCmd is `chiffon init`.
func newInitCmd() *cobra.Command {
	var f initFlags
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
they will be on the hosts. Existing secrets are kept, and so are the tokens of a
site the first release wrote (tokens/: the API's and each agent's own); existing
configs are only replaced with --force.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := f.options(cmd.Flags().Changed)
			if err != nil {
				return usagef(err.Error())
			}
			layout, err := opts.Layout()
			if err != nil {
				return usagef(err.Error())
			}
			st, err := layout.Write()
			if err != nil {
				return err
			}
			layout.WriteSummary(cmd.OutOrStdout(), st)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.Dir, "dir", "", "directory to write into")
	fs.StringSliceVar(&f.agents, "agents", []string{"infra", "desktop", "code", "research"}, "agent types, or type=id pairs")
	fs.StringArrayVar(&f.clients, "client", nil, "a client identity NAME, or NAME=id,id to limit the agents it may command (repeatable)")
	fs.StringSliceVar(&f.NATS, "nats", []string{"nats://127.0.0.1:4222"}, "NATS URLs the daemons connect to")
	fs.StringVar(&f.Listen, "listen", "127.0.0.1:8080", "address of the orchestrator's HTTP API")
	fs.StringVar(&f.SecretsDir, "secrets-dir", "", "where the secret files will be on the hosts (default: <dir>/secrets)")
	fs.StringVar(&f.SecretsDir, "token-dir", "", "old name of --secrets-dir")
	_ = fs.MarkHidden("token-dir")
	fs.StringVar(&f.DataRoot, "data-root", "/var/lib/chiffon", "parent of every daemon's data dir on the hosts")
	fs.StringSliceVar(&f.BrokerHosts, "broker-host", nil, "names and IPs of the broker in its TLS certificate (default: the hosts of --nats)")
	fs.StringVar(&f.BrokerListen, "broker-listen", "0.0.0.0:4222", "address the broker listens on (broker.conf); with --ha, the host every node listens on")
	fs.StringSliceVar(&f.APIHosts, "api-host", nil, "names and IPs of the orchestrator in its HTTP API's certificate, when --listen is beyond loopback (default: the host of --listen, else --broker-host's); with --ha every orchestrator's host is added")
	fs.BoolVar(&f.MutualTLS, "mutual-tls", false, "require a client certificate from every daemon as well as its NKey")
	fs.BoolVar(&f.Operator, "operator", false, "run the broker in NATS operator mode: each daemon a user JWT (.creds) the orchestrator can revoke without a broker restart")
	fs.BoolVar(&f.Force, "force", false, "replace existing config files")
	fs.BoolVar(&f.ha, "ha", false, "a three-node NATS cluster (one --nats URL per node) and a group of orchestrators sharing their tasks in its JetStream")
	fs.IntVar(&f.haOpts.Orchestrators, "orchestrators", 2, "with --ha: how many orchestrators, 2 or 3")
	fs.StringSliceVar(&f.haOpts.Routes, "cluster-routes", nil, "with --ha: the nodes' route URLs, in the order of --nats (default: port 6222 of each --nats host)")
	fs.StringSliceVar(&f.haOpts.OrchestratorHosts, "orchestrator-host", nil, "with --ha: the host of each orchestrator, for its advertised API address and certificate (default: the hosts of the first --nats URLs)")
	fs.StringVar(&f.haOpts.Group, "group", "main", "with --ha: the orchestrators' shared id")
	addWebsocketFlags(fs, &f.ws)
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// haFlags are the flags that mean something only with --ha.
var haFlags = []string{"orchestrators", "cluster-routes", "orchestrator-host", "group"}

// options are the site.Options of the flags: the flags of --ha only with it,
// --broker-host only without it, and the agents and clients parsed.
func (f initFlags) options(changed func(string) bool) (site.Options, error) {
	o := f.Options
	if f.ha {
		if changed("broker-host") {
			// Its names would be in no certificate: each node's names the hosts of its URLs.
			return o, errors.New("--broker-host does not go with --ha: node N's certificate names the hosts of --nats and --cluster-routes URL N")
		}
		o.HA = &f.haOpts
	}
	for _, name := range haFlags {
		if !f.ha && changed(name) {
			return o, fmt.Errorf("--%s needs --ha", name)
		}
	}
	var err error
	if o.Websocket, err = websocketOptions(f.ws, changed); err != nil {
		return o, err
	}
	if o.Agents, err = site.ParseAgents(f.agents); err != nil {
		return o, fmt.Errorf("--agents: %w", err)
	}
	if o.Clients, err = site.ParseClients(f.clients, o.Agents); err != nil {
		return o, fmt.Errorf("--client: %w", err)
	}
	return o, nil
}
