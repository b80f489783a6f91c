package core

import (
	"slices"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
)

// Governance: what each agent may take, how often, how large, and which work
// waits for a person's yes. The policy says it per agent (policy.AgentConfig)
// and per work type for every agent (policy.WorkTypeConfig); the limits are in
// limits.go and routing.go, approvals in approval.go.

// allowedOf is what of offered an agent configured with ac may be sent, and
// what it may not: all of it when ac sets no allowed_work_types.
func allowedOf(ac *policy.AgentConfig, offered []string) (kept, dropped []string) {
	if ac == nil || len(ac.AllowedWorkTypes) == 0 {
		return offered, nil
	}
	for _, w := range offered {
		if slices.Contains(ac.AllowedWorkTypes, w) {
			kept = append(kept, w)
		} else {
			dropped = append(dropped, w)
		}
	}
	return kept, dropped
}

// capped is the capacity of an agent configured with ac that says it has room
// for n tasks: n, or its max_concurrency when that is lower; at least 1.
func capped(ac *policy.AgentConfig, n int) int {
	if ac != nil && ac.MaxConcurrency > 0 && ac.MaxConcurrency < n {
		n = ac.MaxConcurrency
	}
	return max(n, 1)
}

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
