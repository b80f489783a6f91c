package core

import (
	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
)

// Governance: what each agent may take, how often, how large, and which work
// waits for a person's yes. The policy says it per agent (policy.AgentConfig,
// with what it allows of a registration: Allowed, Capacity) and per work type
// for every agent (policy.WorkTypeConfig); the limits are in limits.go and
// routing.go, approvals in approval.go.

// limitsOf are ac's limits, or nil when it sets none.
func limitsOf(ac *policy.AgentConfig) *api.AgentLimits {
	if ac == nil {
		return nil
	}
	l := api.AgentLimits{AllowedWorkTypes: ac.AllowedWorkTypes, MaxConcurrency: ac.MaxConcurrency,
		RateLimit: ac.RateLimit, MaxRequestBytes: ac.MaxRequestBytes}
	if len(l.AllowedWorkTypes) == 0 && l.MaxConcurrency == 0 && l.RateLimit == "" && l.MaxRequestBytes == 0 {
		return nil
	}
	return &l
}
