package orchestrator

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/workflow"
	"go.yaml.in/yaml/v3"
)

// WorkflowsConfig are the workflows of the config (docs/workflows.md). Each
// is written as the API's JSON body is (api.WorkflowSpec), in YAML: the keys
// are the same, and an unknown key is refused.
type WorkflowsConfig []api.WorkflowSpec

// UnmarshalYAML reads the workflows through JSON, so that their keys are the
// API's.
func (w *WorkflowsConfig) UnmarshalYAML(n *yaml.Node) error {
	var generic []any
	if err := n.Decode(&generic); err != nil {
		return err
	}
	data, err := json.Marshal(generic)
	if err != nil {
		return fmt.Errorf("workflows: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var specs []api.WorkflowSpec
	if err := dec.Decode(&specs); err != nil {
		return fmt.Errorf("workflows: %w", err)
	}
	*w = specs
	return nil
}

// validate checks each workflow whole, and that no two share a name.
func (w WorkflowsConfig) validate() error {
	seen := map[string]bool{}
	for i := range w {
		s := &w[i]
		if err := workflow.Check(s); err != nil {
			if fe, ok := err.(*api.FieldError); ok {
				return fmt.Errorf("config: workflows[%d].%s: %s", i, fe.Field, fe.Message)
			}
			return fmt.Errorf("config: workflows[%d]: %w", i, err)
		}
		if seen[s.Name] {
			return fmt.Errorf("config: workflows[%d].name: workflow %q is defined twice", i, s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}
