package core

import (
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
)

// Config is what the core runs with: the orchestrator's policy, with every
// agent's tokens read (Agents' Token and OrchestratorToken set), and where it
// runs.
type Config struct {
	// ID is the orchestrator's orch_id.
	ID string
	// Subjects are the site's NATS subjects.
	Subjects broker.Subjects
	// Instance, when set, names this orchestrator of a group in every message
	// to an agent (broker.HeaderInstance).
	Instance string
	policy.Policy
}
