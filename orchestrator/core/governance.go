package core

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"golang.org/x/time/rate"
)

// Governance: what each agent may take, how often, how large, and which work
// waits for a person's yes. The config says it per agent (AgentConfig) and per
// work type for every agent (WorkTypeConfig); the limits are in limits.go and
// routing.go, approvals in approval.go.

// Limits bound the work sent to an agent.
type Limits struct {
	// RateLimit bounds how often work is sent: "N/s", "N/m" or "N/h", spaced
	// evenly (a token bucket of one); "" means no bound. A task over it waits in
	// its type's queue, or goes to another agent with room.
	RateLimit string `yaml:"rate_limit"`
	// MaxRequestBytes bounds a work_request's encoded size; 0 means only the
	// broker's max payload. A submit over it is refused.
	MaxRequestBytes int64 `yaml:"max_request_bytes"`
}

// WorkTypeConfig is what holds for a work type on every agent.
type WorkTypeConfig struct {
	// Limits apply to this work type on each agent: its rate is counted per agent.
	Limits `yaml:",inline"`
	// Approval is "required" for work that waits for an operator's yes before
	// any dispatch, or "" (none).
	Approval string `yaml:"approval"`
}

// ApprovalRequired is the Approval of a work type that needs a yes.
const ApprovalRequired = "required"

// ApprovalConfig says how long approvals wait.
type ApprovalConfig struct {
	// ExpiresAfter rejects a task nobody approved or rejected in time; 0 means
	// 24 h.
	ExpiresAfter time.Duration `yaml:"expires_after"`
}

func (c ApprovalConfig) expiresAfter() time.Duration {
	if c.ExpiresAfter <= 0 {
		return 24 * time.Hour
	}
	return c.ExpiresAfter
}

// parseRate reads a rate limit: "N/s", "N/m" or "N/h" with N from 1.
func parseRate(s string) (rate.Limit, error) {
	n, unit, ok := strings.Cut(s, "/")
	count, err := strconv.Atoi(n)
	if !ok || err != nil || count < 1 {
		return 0, fmt.Errorf("must be N/s, N/m or N/h with N at least 1, got %q", s)
	}
	per := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[unit]
	if per == 0 {
		return 0, fmt.Errorf("must be N/s, N/m or N/h with N at least 1, got %q", s)
	}
	return rate.Limit(float64(count) / per.Seconds()), nil
}

func (l Limits) validate(key string) error {
	if l.RateLimit != "" {
		if _, err := parseRate(l.RateLimit); err != nil {
			return fmt.Errorf("config: %s.rate_limit: %w", key, err)
		}
	}
	if l.MaxRequestBytes < 0 {
		return fmt.Errorf("config: %s.max_request_bytes: must not be negative", key)
	}
	return nil
}

// validateGovernance checks the work_types and approval sections and each
// agent's limits.
func (c Config) validateGovernance() error {
	for _, name := range slices.Sorted(maps.Keys(c.WorkTypes)) {
		key := "work_types." + name
		if msg := envelope.CheckWorkType(name); msg != "" {
			return fmt.Errorf("config: %s: %s", key, msg)
		}
		wt := c.WorkTypes[name]
		if err := wt.Limits.validate(key); err != nil {
			return err
		}
		if wt.Approval != "" && wt.Approval != ApprovalRequired {
			return fmt.Errorf("config: %s.approval: must be %q or empty, got %q", key, ApprovalRequired, wt.Approval)
		}
	}
	if c.Approval.ExpiresAfter < 0 {
		return fmt.Errorf("config: approval.expires_after: must not be negative")
	}
	for i, a := range c.Agents {
		key := fmt.Sprintf("agents[%d]", i)
		if err := a.Limits.validate(key); err != nil {
			return err
		}
		if a.MaxConcurrency < 0 {
			return fmt.Errorf("config: %s.max_concurrency: must not be negative", key)
		}
		for j, w := range a.AllowedWorkTypes {
			if msg := envelope.CheckWorkType(w); msg != "" {
				return fmt.Errorf("config: %s.allowed_work_types[%d]: %s", key, j, msg)
			}
		}
		for j, w := range a.ApprovalRequired {
			if msg := envelope.CheckWorkType(w); msg != "" {
				return fmt.Errorf("config: %s.approval_required[%d]: %s", key, j, msg)
			}
		}
	}
	return nil
}

// agentConfig is agentID's entry in the config, or nil.
func (c Config) agentConfig(agentID string) *AgentConfig {
	for i := range c.Agents {
		if c.Agents[i].ID == agentID {
			return &c.Agents[i]
		}
	}
	return nil
}

// allowedOf is what of offered an agent configured with ac may be sent, and
// what it may not: all of it when ac sets no allowed_work_types.
func allowedOf(ac *AgentConfig, offered []string) (kept, dropped []string) {
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
func capped(ac *AgentConfig, n int) int {
	if ac != nil && ac.MaxConcurrency > 0 && ac.MaxConcurrency < n {
		n = ac.MaxConcurrency
	}
	return max(n, 1)
}

// limitsOf are ac's limits, or nil when it sets none.
func limitsOf(ac *AgentConfig) *api.AgentLimits {
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
