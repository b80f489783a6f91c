package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/examples"
	"github.com/spf13/cobra"
)

// initOptions say what `chiffon init` writes and what the configs it writes point at.
type initOptions struct {
	dir      string
	agents   []string
	nats     []string
	listen   string
	tokenDir string
	dataRoot string
	force    bool
}

// initAgent is one agent instance to configure.
type initAgent struct{ typ, id string }

func newInitCmd() *cobra.Command {
	var o initOptions
	cmd := &cobra.Command{
		Use:   "init --dir D [--agents infra,desktop]",
		Short: "Write an orchestrator config, agent configs and their tokens, ready to copy to hosts",
		Long: `Writes, under --dir:
  orchestrator.yaml       the orchestrator's config, allowing every agent below
  agents/<id>.yaml        one config per agent, from the example of its type
  tokens/*.token          the orchestrator's, the API's and each agent's token (0600)

--agents lists agent types (each gets the id <type>-1), or type=id pairs such as
infra=nas-infra. The configs name the token files under --token-dir and the data dirs
under --data-root: where they will be on the hosts. Existing tokens are kept; existing
configs are only replaced with --force.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			agents, err := parseInitAgents(o.agents)
			if err != nil {
				return usagef("--agents: " + err.Error())
			}
			if o.tokenDir == "" {
				abs, err := filepath.Abs(filepath.Join(o.dir, "tokens"))
				if err != nil {
					return err
				}
				o.tokenDir = abs
			}
			return writeInit(cmd.OutOrStdout(), o, agents)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "directory to write into")
	f.StringSliceVar(&o.agents, "agents", []string{"infra", "desktop", "code", "research"}, "agent types, or type=id pairs")
	f.StringSliceVar(&o.nats, "nats", []string{"nats://127.0.0.1:4222"}, "NATS URLs the daemons connect to")
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address of the orchestrator's HTTP API")
	f.StringVar(&o.tokenDir, "token-dir", "", "where the token files will be on the hosts (default: <dir>/tokens)")
	f.StringVar(&o.dataRoot, "data-root", "/var/lib/chiffon", "parent of every daemon's data dir on the hosts")
	f.BoolVar(&o.force, "force", false, "replace existing config files")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

func parseInitAgents(specs []string) ([]initAgent, error) {
	var out []initAgent
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
		out = append(out, initAgent{typ: typ, id: id})
	}
	if len(out) == 0 {
		return nil, errors.New("name at least one agent")
	}
	return out, nil
}

func writeInit(w io.Writer, o initOptions, agents []initAgent) error {
	tokensDir := filepath.Join(o.dir, "tokens")
	if err := os.MkdirAll(filepath.Join(o.dir, "agents"), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(tokensDir, 0o700); err != nil {
		return err
	}
	tokenPath := func(name string) string { return filepath.Join(o.tokenDir, name+".token") }
	for _, name := range append([]string{"orchestrator", "api"}, agentIDs(agents)...) {
		if _, err := loadOrCreateToken(filepath.Join(tokensDir, name+".token")); err != nil {
			return err
		}
	}

	var allowed []map[string]string
	for _, a := range agents {
		allowed = append(allowed, map[string]string{"id": a.id, "token_file": tokenPath(a.id)})
		doc, err := exampleDoc(examples.AgentConfig(a.typ))
		if err != nil {
			return err
		}
		edits := []struct {
			value any
			path  []string
		}{
			{a.id, []string{"id"}},
			{o.nats, []string{"nats", "urls"}},
			{tokenPath(a.id), []string{"token_file"}},
			{tokenPath("orchestrator"), []string{"orchestrator_token_file"}},
			{filepath.Join(o.dataRoot, a.id), []string{"data_dir"}},
		}
		for _, e := range edits {
			if err := doc.set(e.value, e.path...); err != nil {
				return err
			}
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
	for _, e := range []struct {
		value any
		path  []string
	}{
		{o.nats, []string{"nats", "urls"}},
		{tokenPath("orchestrator"), []string{"token_file"}},
		{tokenPath("api"), []string{"api_token_file"}},
		{o.listen, []string{"http", "listen"}},
		{filepath.Join(o.dataRoot, "orchestrator"), []string{"data_dir"}},
		{allowed, []string{"agents"}},
	} {
		if err := doc.set(e.value, e.path...); err != nil {
			return err
		}
	}
	if err := writeConfig(filepath.Join(o.dir, "orchestrator.yaml"), doc, o.force); err != nil {
		return err
	}
	printInitSummary(w, o, agents)
	return nil
}

func exampleDoc(b []byte, err error) (*yamlDoc, error) {
	if err != nil {
		return nil, err
	}
	return parseYAMLDoc(b)
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

func agentIDs(agents []initAgent) []string {
	ids := make([]string, len(agents))
	for i, a := range agents {
		ids[i] = a.id
	}
	return ids
}

func printInitSummary(w io.Writer, o initOptions, agents []initAgent) {
	fmt.Fprintf(w, "Wrote %s:\n", o.dir)
	fmt.Fprintf(w, "  orchestrator.yaml       orchestrator (API %s), tokens orchestrator.token and api.token\n", o.listen)
	for _, a := range agents {
		fmt.Fprintf(w, "  agents/%-16s %s agent, token %s.token\n", a.id+".yaml", a.typ, a.id)
	}
	fmt.Fprintf(w, "Copy each config to its host, with its token and orchestrator.token, to %s.\n", o.tokenDir)
	fmt.Fprintln(w, "Then run: chiffon orchestrator --config orchestrator.yaml, and chiffon agent --config <id>.yaml on each agent host.")
}
