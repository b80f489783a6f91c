package workflowcli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// listCmd is `chiffon workflow list`.
func (cfg Config) listCmd() *cobra.Command {
	return cfg.command(&cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the workflows: where each comes from, its steps and parameters",
		Args:    cobra.NoArgs,
	}, func(cmd *cobra.Command, _ []string, c *client.Client, jsonOut bool) error {
		ws, err := c.Workflows(cmd.Context())
		if err != nil {
			return err
		}
		if jsonOut {
			return cfg.PrintJSON(cmd.OutOrStdout(), ws)
		}
		return printWorkflows(cmd.OutOrStdout(), ws)
	})
}

// printWorkflows is the table of `workflow list`.
func printWorkflows(w io.Writer, ws []*api.Workflow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tSTEPS\tPARAMS\tDESCRIPTION")
	for _, wf := range ws {
		params := "-"
		if len(wf.Params) > 0 {
			params = fmt.Sprint(len(wf.Params))
		}
		desc := wf.Description
		if desc == "" {
			desc = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", wf.Name, wf.Source, len(wf.Steps), params, desc)
	}
	return tw.Flush()
}

// showCmd is `chiffon workflow show NAME`.
func (cfg Config) showCmd() *cobra.Command {
	return cfg.command(&cobra.Command{
		Use:   "show NAME",
		Short: "Show a workflow's spec, as YAML that workflow apply reads back",
		Long: `Prints workflow NAME's spec as YAML, under a comment saying where it comes from
(the orchestrator's config, or the API) and when it was stored: a file that
'workflow apply' reads back. With --json, the workflow as the API has it.`,
		Args: cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, args []string, c *client.Client, jsonOut bool) error {
		wf, err := c.Workflow(cmd.Context(), args[0])
		if err != nil {
			return cfg.noWorkflow(err, args[0])
		}
		if jsonOut {
			return cfg.PrintJSON(cmd.OutOrStdout(), wf)
		}
		return printSpecYAML(cmd.OutOrStdout(), wf)
	})
}

// printSpecYAML writes wf's spec as YAML with the API's keys, under a comment.
func printSpecYAML(w io.Writer, wf *api.Workflow) error {
	data, err := json.Marshal(wf.WorkflowSpec)
	if err != nil {
		return err
	}
	var generic map[string]any
	if err := json.Unmarshal(data, &generic); err != nil {
		return err
	}
	// The keys in the spec's own order, not yaml's sorted one.
	node := &yaml.Node{}
	if err := node.Encode(generic); err != nil {
		return err
	}
	orderKeys(node, []string{"name", "description", "params", "timeout", "max_runs", "steps"})
	fmt.Fprintf(w, "# workflow %s, from the %s, stored %s\n", wf.Name, sourceText(wf.Source),
		wf.UpdatedAt.Local().Format(time.DateTime))
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(node); err != nil {
		return err
	}
	return enc.Close()
}

// orderKeys puts the keys of mapping node in the order of keys, the others
// after them as they are.
func orderKeys(node *yaml.Node, keys []string) {
	if node.Kind != yaml.MappingNode {
		return
	}
	var first, rest []*yaml.Node
	for _, k := range keys {
		for i := 0; i+1 < len(node.Content); i += 2 {
			if node.Content[i].Value == k {
				first = append(first, node.Content[i], node.Content[i+1])
			}
		}
	}
	for i := 0; i+1 < len(node.Content); i += 2 {
		if !slices.Contains(keys, node.Content[i].Value) {
			rest = append(rest, node.Content[i], node.Content[i+1])
		}
	}
	node.Content = append(first, rest...)
}

// sourceText says where a workflow comes from.
func sourceText(source string) string {
	if source == api.WorkflowFromConfig {
		return "orchestrator's config"
	}
	return "API"
}

// applyCmd is `chiffon workflow apply FILE`.
func (cfg Config) applyCmd() *cobra.Command {
	return cfg.command(&cobra.Command{
		Use:   "apply FILE",
		Short: "Store the workflow of a YAML or JSON file, new or in place of the one of its name",
		Long: `Stores the workflow FILE holds (YAML or JSON; - reads stdin), with the keys of the
API's body: name, description, params, steps (each with name, needs, and one of task,
batch and approval), timeout, max_runs. The orchestrator checks it whole and names
what it refuses. Runs already running keep the spec they began with. A workflow of
the orchestrator's config cannot be changed here.`,
		Args: cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, args []string, c *client.Client, jsonOut bool) error {
		spec, err := readSpec(cmd.InOrStdin(), args[0])
		if err != nil {
			return cfg.Usage(err.Error())
		}
		wf, err := c.PutWorkflow(cmd.Context(), spec)
		var ae *client.APIError
		switch {
		case errors.As(err, &ae) && ae.Status == http.StatusBadRequest:
			return cfg.Explain(fmt.Sprintf("%s: %s: %s (HTTP 400)", args[0], ae.Field, ae.Message), err)
		case err != nil:
			return cfg.noWorkflow(err, spec.Name)
		case jsonOut:
			return cfg.PrintJSON(cmd.OutOrStdout(), wf)
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "workflow %s stored: %d steps\n", wf.Name, len(wf.Steps))
		return err
	})
}

// readSpec reads the workflow spec of file (- is stdin), YAML or JSON, with
// the API's keys: an unknown one is refused.
func readSpec(stdin io.Reader, file string) (api.WorkflowSpec, error) {
	var spec api.WorkflowSpec
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return spec, err
	}
	var generic map[string]any
	if err := yaml.Unmarshal(data, &generic); err != nil {
		return spec, fmt.Errorf("%s: not YAML or JSON: %v", file, err)
	}
	asJSON, err := json.Marshal(generic)
	if err != nil {
		return spec, fmt.Errorf("%s: %v", file, err)
	}
	dec := json.NewDecoder(bytes.NewReader(asJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return spec, fmt.Errorf("%s: %v", file, err)
	}
	if spec.Name == "" {
		return spec, fmt.Errorf("%s: the workflow has no name (name: ...)", file)
	}
	return spec, nil
}

// deleted is what `workflow delete --json` prints.
type deleted struct {
	Name    string `json:"name"`
	Deleted bool   `json:"deleted"`
}

// deleteCmd is `chiffon workflow delete NAME`.
func (cfg Config) deleteCmd() *cobra.Command {
	return cfg.command(&cobra.Command{
		Use:     "delete NAME",
		Aliases: []string{"rm"},
		Short:   "Delete a workflow; its runs stay, and those running go on",
		Long: `Deletes workflow NAME. Its runs stay, and those running go on with the spec they began
with. A workflow of the orchestrator's config cannot be deleted here. With --json it
prints {"name": NAME, "deleted": true}.`,
		Args: cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, args []string, c *client.Client, jsonOut bool) error {
		if err := c.DeleteWorkflow(cmd.Context(), args[0]); err != nil {
			return cfg.noWorkflow(err, args[0])
		}
		if jsonOut {
			return cfg.PrintJSON(cmd.OutOrStdout(), deleted{Name: args[0], Deleted: true})
		}
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "workflow %s deleted; its runs stay\n", args[0])
		return err
	})
}
