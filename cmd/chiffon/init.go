package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/examples"
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

--agents lists agent types (each gets the id <type>-1), or type=id pairs such as
infra=nas-infra. --client NAME makes an identity for a script that commands agents
directly with another NATS client; NAME=id,id limits it to those agents. The configs
name the secret files under --secrets-dir and the data dirs under --data-root: where
they will be on the hosts. Existing secrets are kept; existing configs are only
replaced with --force.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
	f.StringVar(&o.brokerListen, "broker-listen", "0.0.0.0:4222", "address the broker listens on (broker.conf)")
	f.StringSliceVar(&o.apiHosts, "api-host", nil, "names and IPs of the orchestrator in its HTTP API's certificate, when --listen is beyond loopback (default: the host of --listen, else --broker-host's)")
	f.BoolVar(&o.mutualTLS, "mutual-tls", false, "require a client certificate from every daemon as well as its NKey")
	f.BoolVar(&o.force, "force", false, "replace existing config files")
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

func writeInit(w io.Writer, o initOptions, agents []siteAgent, clients []siteClient) error {
	hosts, err := o.brokerHostNames()
	if err != nil {
		return usagef(err.Error())
	}
	// Refuse before anything is made: a new NKey without the broker.conf that
	// lists it would lock its daemon out.
	targets := []string{filepath.Join(o.dir, "broker.conf"), filepath.Join(o.dir, "orchestrator.yaml")}
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
	apiHosts, err := o.apiHostNames(hosts)
	if err != nil {
		return usagef(err.Error())
	}
	st, err := ensureSite(filepath.Join(o.dir, "secrets"), siteSpec{agents: agents, clients: clients,
		brokerHosts: hosts, apiHosts: apiHosts, mutualTLS: o.mutualTLS})
	if err != nil {
		return err
	}
	onHost := func(name string) string { return filepath.Join(o.secretsDir, name) }
	if err := broker.WriteServerFile(filepath.Join(o.dir, "broker.conf"), st.brokerFile(o.secretsDir, o.brokerListen)); err != nil {
		return err
	}
	var allowed []map[string]string
	for _, a := range agents {
		allowed = append(allowed, map[string]string{"id": a.id, "type": a.typ,
			"token_file": onHost(agentTokenName(a.id)), "orchestrator_token_file": onHost(agentOrchTokenName(a.id))})
		id := broker.Identity{Role: broker.RoleAgent, Name: a.id}
		doc, err := exampleDoc(examples.AgentConfig(a.typ))
		if err != nil {
			return err
		}
		edits := append(natsEdits(st.natsConfig(id, o.nats, o.secretsDir)),
			yamlEdit{a.id, []string{"id"}},
			yamlEdit{onHost(agentTokenName(a.id)), []string{"token_file"}},
			yamlEdit{onHost(agentOrchTokenName(a.id)), []string{"orchestrator_token_file"}},
			yamlEdit{filepath.Join(o.dataRoot, a.id), []string{"data_dir"}})
		if err := applyEdits(doc, edits); err != nil {
			return err
		}
		doc.remove("name") // each host's agent is named after the host by default
		if err := writeConfig(filepath.Join(o.dir, "agents", a.id+".yaml"), doc, o.force); err != nil {
			return err
		}
	}

	doc, err := exampleDoc(examples.OrchestratorConfig())
	if err != nil {
		return err
	}
	edits := append(natsEdits(st.natsConfig(broker.Identity{Role: broker.RoleOrchestrator}, o.nats, o.secretsDir)),
		yamlEdit{onHost(siteAPIToken), []string{"api_token_file"}},
		yamlEdit{o.listen, []string{"http", "listen"}},
		yamlEdit{filepath.Join(o.dataRoot, "orchestrator"), []string{"data_dir"}},
		yamlEdit{allowed, []string{"agents"}})
	if apiHosts != nil {
		edits = append(edits, yamlEdit{map[string]string{"cert_file": onHost(siteAPIPEM), "key_file": onHost(siteAPIKey)},
			[]string{"http", "tls"}})
	}
	if err := applyEdits(doc, edits); err != nil {
		return err
	}
	// The example's first comment line names the example file.
	head := &doc.root.HeadComment
	*head = strings.Replace(*head, "examples/orchestrator.yaml", "orchestrator.yaml  (written by chiffon init)", 1)
	if err := writeConfig(filepath.Join(o.dir, "orchestrator.yaml"), doc, o.force); err != nil {
		return err
	}
	for _, c := range clients {
		if err := writeClientNotes(o, st, c); err != nil {
			return err
		}
	}
	printInitSummary(w, o, st)
	return nil
}

// apiHostNames are the names in the HTTP API's certificate, or nil when the API
// listens on loopback only and its token never crosses a network: --api-host, or
// the host of --listen, or (listening on every address) the broker's names, since
// the orchestrator often runs beside the broker.
func (o initOptions) apiHostNames(brokerHosts []string) ([]string, error) {
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
	return brokerHosts, nil
}

// yamlEdit is a value to set at a path of a config.
type yamlEdit struct {
	value any
	path  []string
}

func applyEdits(doc *yamlDoc, edits []yamlEdit) error {
	for _, e := range edits {
		if err := doc.set(e.value, e.path...); err != nil {
			return err
		}
	}
	return nil
}

// natsEdits set a config's nats section to c, keeping the comments around it.
func natsEdits(c broker.NATSConfig) []yamlEdit {
	tlsKeys := map[string]string{"ca_file": c.TLS.CAFile}
	if c.TLS.CertFile != "" {
		tlsKeys["cert_file"], tlsKeys["key_file"] = c.TLS.CertFile, c.TLS.KeyFile
	}
	return []yamlEdit{
		{c.URLs, []string{"nats", "urls"}},
		{c.NKeyFile, []string{"nats", "nkey_file"}},
		{tlsKeys, []string{"nats", "tls"}},
	}
}

// writeClientNotes writes clients/<name>.txt: what a client identity may do and
// how to connect as it with the nats CLI.
func writeClientNotes(o initOptions, st *site, c siteClient) error {
	id := broker.Identity{Role: broker.RoleClient, Name: c.name, Agents: c.agents}
	nc := st.natsConfig(id, o.nats, o.secretsDir)
	subj := broker.Subjects{}
	perms := subj.Permissions(id, st.identities)
	var b strings.Builder
	fmt.Fprintf(&b, "Client %s may command agents: %s\n\n", c.name, strings.Join(c.agents, ", "))
	fmt.Fprintf(&b, "It may publish to:\n  %s\nand subscribe to:\n  %s\n\n",
		strings.Join(perms.Publish, "\n  "), strings.Join(perms.Subscribe, "\n  "))
	fmt.Fprintf(&b, "Its requests must use the inbox prefix %s. With the nats CLI:\n\n", subj.InboxOf(id))
	flags := fmt.Sprintf("--server %s --nkey %s --tlsca %s --inbox-prefix %s", strings.Join(nc.URLs, ","), nc.NKeyFile, nc.TLS.CAFile, subj.InboxOf(id))
	if nc.TLS.CertFile != "" {
		flags += fmt.Sprintf(" --tlscert %s --tlskey %s", nc.TLS.CertFile, nc.TLS.KeyFile)
	}
	if len(c.agents) > 0 {
		a := c.agents[0]
		// --no-templates: the nats CLI would otherwise read {{ }} in a body as a template.
		fmt.Fprintf(&b, "  nats %s \\\n    request --no-templates %s \\\n"+
			"    \"$(chiffon envelope new --type work_request --to %s --work-type echo --param message=hi)\" \\\n"+
			"    --header \"Authorization:Bearer $(cat %s)\" --header Chiffon-Agent-Id:%s\n\n",
			flags, subj.AgentWork(a), agentType(st, a), filepath.Join(o.secretsDir, agentOrchTokenName(a)), a)
		fmt.Fprintf(&b, "The Authorization token of each agent is its agent-<id>.orchestrator.token; its answers\n"+
			"carry its agent-<id>.token, which the client should check.\n")
	}
	return os.WriteFile(filepath.Join(o.dir, "clients", c.name+".txt"), []byte(b.String()), 0o644)
}

func agentType(st *site, id string) string {
	for _, a := range st.spec.agents {
		if a.id == id {
			return a.typ
		}
	}
	return ""
}

func exampleDoc(b []byte, err error) (*yamlDoc, error) {
	if err != nil {
		return nil, err
	}
	return parseYAMLDoc(b)
}

// refuseOverwrite fails when path exists and force is off.
func refuseOverwrite(path string, force bool) error {
	if force {
		return nil
	}
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s exists; pass --force to replace it", path)
	}
	return nil
}

func writeConfig(path string, doc *yamlDoc, force bool) error {
	b, err := doc.bytes()
	if err != nil {
		return err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !force {
		flags |= os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists; pass --force to replace it", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func agentIDs(agents []siteAgent) []string {
	ids := make([]string, len(agents))
	for i, a := range agents {
		ids[i] = a.id
	}
	return ids
}

func printInitSummary(w io.Writer, o initOptions, st *site) {
	fmt.Fprintf(w, "Wrote %s:\n", o.dir)
	fmt.Fprintf(w, "  broker.conf             the broker (%s): NKey users, TLS, least privilege\n", o.brokerListen)
	scheme, ca := "http", ""
	if st.spec.apiHosts != nil {
		scheme, ca = "https", fmt.Sprintf("; clients trust it with --api-ca-file %s", filepath.Join(o.dir, "secrets", siteCA))
	}
	fmt.Fprintf(w, "  orchestrator.yaml       orchestrator (API %s://%s%s)\n", scheme, o.listen, ca)
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
	fmt.Fprintln(w, "Then run: chiffon broker --config broker.conf; chiffon orchestrator --config orchestrator.yaml;")
	fmt.Fprintln(w, "and chiffon agent --config <id>.yaml on each agent host.")
}
