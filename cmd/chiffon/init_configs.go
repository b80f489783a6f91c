package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/examples"
)

// writeAgentConfigs writes agents/<id>.yaml for each agent, from the example of
// its type, and returns the orchestrator's list of allowed agents.
func writeAgentConfigs(o initOptions, st *site, agents []siteAgent) ([]map[string]string, error) {
	onHost := func(name string) string { return filepath.Join(o.secretsDir, name) }
	var allowed []map[string]string
	for _, a := range agents {
		allowed = append(allowed, map[string]string{"id": a.id, "type": a.typ,
			"token_file": onHost(agentTokenName(a.id)), "orchestrator_token_file": onHost(agentOrchTokenName(a.id))})
		id := broker.Identity{Role: broker.RoleAgent, Name: a.id}
		doc, err := exampleDoc(examples.AgentConfig(a.typ))
		if err != nil {
			return nil, err
		}
		edits := append(natsEdits(st.natsConfig(id, o.nats, o.secretsDir)),
			yamlEdit{a.id, []string{"id"}},
			yamlEdit{onHost(agentTokenName(a.id)), []string{"token_file"}},
			yamlEdit{onHost(agentOrchTokenName(a.id)), []string{"orchestrator_token_file"}},
			yamlEdit{filepath.Join(o.dataRoot, a.id), []string{"data_dir"}})
		if err := applyEdits(doc, edits); err != nil {
			return nil, err
		}
		doc.remove("name") // each host's agent is named after the host by default
		if err := writeConfig(filepath.Join(o.dir, "agents", a.id+".yaml"), doc, o.force); err != nil {
			return nil, err
		}
	}
	return allowed, nil
}

// writeOrchConfig writes an orchestrator's config from the example: the site's
// NATS identity, API token and agents, its data dir, and orch's own edits.
func writeOrchConfig(o initOptions, st *site, orch initOrch, allowed []map[string]string) error {
	onHost := func(name string) string { return filepath.Join(o.secretsDir, name) }
	doc, err := exampleDoc(examples.OrchestratorConfig())
	if err != nil {
		return err
	}
	edits := append(natsEdits(st.natsConfig(broker.Identity{Role: broker.RoleOrchestrator}, o.nats, o.secretsDir)),
		yamlEdit{onHost(siteAPIToken), []string{"api_token_file"}},
		yamlEdit{o.listen, []string{"http", "listen"}},
		yamlEdit{orch.dataDir, []string{"data_dir"}},
		yamlEdit{allowed, []string{"agents"}})
	if st.spec.apiHosts != nil {
		edits = append(edits, yamlEdit{map[string]string{"cert_file": onHost(siteAPIPEM), "key_file": onHost(siteAPIKey)},
			[]string{"http", "tls"}})
	}
	if err := applyEdits(doc, append(edits, orch.edits...)); err != nil {
		return err
	}
	// The example's first comment line names the example file.
	head := &doc.root.HeadComment
	*head = strings.Replace(*head, "examples/orchestrator.yaml", orch.file+"  (written by chiffon init)", 1)
	return writeConfig(filepath.Join(o.dir, orch.file), doc, o.force)
}

// storeIdentity is the store.jetstream.nats section of an orchestrator's
// config: the store connection's NKey and, with mutual TLS, its certificate.
func storeIdentity(c broker.NATSConfig) map[string]any {
	out := map[string]any{"nkey_file": c.NKeyFile}
	if c.TLS.CertFile != "" {
		out["tls"] = map[string]string{"cert_file": c.TLS.CertFile, "key_file": c.TLS.KeyFile}
	}
	return out
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
