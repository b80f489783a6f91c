// Package examples holds the example configurations shipped with Chiffon, embedded so
// that `chiffon up` and `chiffon init` work from a lone binary.
package examples

import "embed"

// FS holds agents/<type>.yaml for each agent type and orchestrator.yaml.
//
//go:embed agents/*.yaml orchestrator.yaml
var FS embed.FS

// AgentConfig returns the example agent config of one agent type.
func AgentConfig(agentType string) ([]byte, error) {
	return FS.ReadFile("agents/" + agentType + ".yaml")
}

// OrchestratorConfig returns the example orchestrator config.
func OrchestratorConfig() ([]byte, error) {
	return FS.ReadFile("orchestrator.yaml")
}
