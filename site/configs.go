package site

import (
	"cmp"
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
func (l *Layout) writeAgentConfigs(st *Secrets) ([]map[string]string, error) {
	var allowed []map[string]string
	for _, a := range l.Agents {
		id := broker.Identity{Role: broker.RoleAgent, Name: a.ID}
		entry := map[string]string{"id": a.ID, "type": a.Type,
			"token_file": l.onHost(AgentToken(a.ID)), "orchestrator_token_file": l.onHost(AgentOrchestratorToken(a.ID))}
		if st.operator != nil {
			// chiffon agent revoke revokes this key at the broker.
			entry["public_key"] = st.nkeys[credsName(id)]
		}
		allowed = append(allowed, entry)
		doc, err := exampleDoc(examples.AgentConfig(a.Type))
		if err != nil {
			return nil, err
		}
		edits := append(natsEdits(st.NATSConfig(id, l.NATS, l.SecretsDir)),
			yamlEdit{a.ID, []string{"id"}},
			yamlEdit{l.onHost(AgentToken(a.ID)), []string{"token_file"}},
			yamlEdit{l.onHost(AgentOrchestratorToken(a.ID)), []string{"orchestrator_token_file"}},
			yamlEdit{filepath.Join(l.DataRoot, a.ID), []string{"data_dir"}})
		if st.operator != nil {
			useCreds(doc)
		}
		if err := applyEdits(doc, edits); err != nil {
			return nil, err
		}
		doc.remove("name") // each host's agent is named after the host by default
		if err := writeConfig(filepath.Join(l.Dir, "agents", a.ID+".yaml"), doc, l.Force); err != nil {
			return nil, err
		}
	}
	return allowed, nil
}

// onHost is the path of a secret file on the hosts.
func (l *Layout) onHost(name string) string { return filepath.Join(l.SecretsDir, name) }

// writeOrchConfig writes an orchestrator's config from the example: the site's
// NATS identity, API token and agents, its data dir, and for a group member
// the group's settings and the store's identity.
func (l *Layout) writeOrchConfig(st *Secrets, orch OrchestratorFile, allowed []map[string]string) error {
	doc, err := exampleDoc(examples.OrchestratorConfig())
	if err != nil {
		return err
	}
	edits := append(natsEdits(st.NATSConfig(orchID, l.NATS, l.SecretsDir)),
		yamlEdit{l.onHost(APIToken), []string{"api_token_file"}},
		yamlEdit{cmp.Or(orch.Listen, l.Listen), []string{"http", "listen"}},
		yamlEdit{orch.DataDir, []string{"data_dir"}},
		yamlEdit{allowed, []string{"agents"}})
	if l.Spec.APIHosts != nil {
		edits = append(edits, yamlEdit{map[string]string{"cert_file": l.onHost(APICert), "key_file": l.onHost(APIKey)},
			[]string{"http", "tls"}})
	}
	if l.HA != nil {
		edits = append(append(edits, haEdits(l.HA.Group, orch.Advertise)...),
			yamlEdit{storeIdentity(st.NATSConfig(storeID, nil, l.SecretsDir)), []string{"store", "jetstream", "nats"}})
	}
	if st.operator != nil {
		useCreds(doc)
		edits = append(edits, l.enrollEdit(st)...)
	}
	if err := applyEdits(doc, edits); err != nil {
		return err
	}
	// The example's first comment line names the example file.
	head := &doc.root.HeadComment
	*head = strings.Replace(*head, "examples/orchestrator.yaml", orch.File+"  (written by chiffon init)", 1)
	return writeConfig(filepath.Join(l.Dir, orch.File), doc, l.Force)
}

// storeIdentity is the store.jetstream.nats section of an orchestrator's
// config: the store connection's NKey and, with mutual TLS, its certificate.
func storeIdentity(c broker.NATSConfig) map[string]any {
	out := map[string]any{"nkey_file": c.NKeyFile}
	if c.CredsFile != "" {
		out = map[string]any{"creds_file": c.CredsFile}
	}
	if c.TLS.CertFile != "" {
		out["tls"] = map[string]string{"cert_file": c.TLS.CertFile, "key_file": c.TLS.KeyFile}
	}
	return out
}

// natsEdits set a config's nats section to c, keeping the comments around it.
func natsEdits(c broker.NATSConfig) []yamlEdit {
	tlsKeys := map[string]string{"ca_file": c.TLS.CAFile}
	if c.TLS.CertFile != "" {
		tlsKeys["cert_file"], tlsKeys["key_file"] = c.TLS.CertFile, c.TLS.KeyFile
	}
	return []yamlEdit{
		{c.URLs, []string{"nats", "urls"}},
		identityEdit(c),
		{tlsKeys, []string{"nats", "tls"}},
	}
}

// identityEdit sets the nats section's NKey seed, or its .creds file.
func identityEdit(c broker.NATSConfig) yamlEdit {
	if c.CredsFile != "" {
		return yamlEdit{c.CredsFile, []string{"nats", "creds_file"}}
	}
	return yamlEdit{c.NKeyFile, []string{"nats", "nkey_file"}}
}

// writeClientNotes writes clients/<name>.txt: what a client identity may do and
// how to connect as it with the nats CLI.
func (l *Layout) writeClientNotes(st *Secrets, c Client) error {
	id := broker.Identity{Role: broker.RoleClient, Name: c.Name, Agents: c.Agents}
	nc := st.NATSConfig(id, l.NATS, l.SecretsDir)
	subj := broker.Subjects{}
	perms := subj.Permissions(id, st.identities)
	var b strings.Builder
	fmt.Fprintf(&b, "Client %s may command agents: %s\n\n", c.Name, strings.Join(c.Agents, ", "))
	fmt.Fprintf(&b, "It may publish to:\n  %s\nand subscribe to:\n  %s\n\n",
		strings.Join(perms.Publish, "\n  "), strings.Join(perms.Subscribe, "\n  "))
	fmt.Fprintf(&b, "Its requests must use the inbox prefix %s. With the nats CLI:\n\n", subj.InboxOf(id))
	identity := "--nkey " + nc.NKeyFile
	if nc.CredsFile != "" {
		identity = "--creds " + nc.CredsFile
	}
	flags := fmt.Sprintf("--server %s %s --tlsca %s --inbox-prefix %s", strings.Join(nc.URLs, ","), identity, nc.TLS.CAFile, subj.InboxOf(id))
	if nc.TLS.CertFile != "" {
		flags += fmt.Sprintf(" --tlscert %s --tlskey %s", nc.TLS.CertFile, nc.TLS.KeyFile)
	}
	if len(c.Agents) > 0 {
		a := c.Agents[0]
		// --no-templates: the nats CLI would otherwise read {{ }} in a body as a template.
		fmt.Fprintf(&b, "  nats %s \\\n    request --no-templates %s \\\n"+
			"    \"$(chiffon envelope new --type work_request --to %s --work-type echo --param message=hi)\" \\\n"+
			"    --header \"Authorization:Bearer $(cat %s)\" --header Chiffon-Agent-Id:%s\n\n",
			flags, subj.AgentWork(a), st.spec.agentType(a), l.onHost(AgentOrchestratorToken(a)), a)
		fmt.Fprintf(&b, "The Authorization token of each agent is its agent-<id>.orchestrator.token; its answers\n"+
			"carry its agent-<id>.token, which the client should check.\n")
	}
	return os.WriteFile(filepath.Join(l.Dir, "clients", c.Name+".txt"), []byte(b.String()), 0o644)
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
