// Package policy holds what the orchestrator's core is configured with: the
// agents allowed in and what each may take (allowed work types, concurrency,
// rate and size limits, approvals), the work types' limits and approvals, the
// timeouts, the retry and breaker policies and the cap on a task's output; each
// with its default and its check, naming the key of the config file.
package policy

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/nats-io/nkeys"
)

// Policy is the task lifecycle's part of the orchestrator's config.
type Policy struct {
	// Agents are the agents allowed in.
	Agents         []AgentConfig
	Timeouts       TimeoutConfig
	Retry          RetryConfig
	Breaker        BreakerConfig
	WorkTypes      map[string]WorkTypeConfig
	Approval       ApprovalConfig
	MaxOutputBytes int64
}

// WithDefaults returns c with every zero duration and count replaced by its default.
func (c Policy) WithDefaults() Policy {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Timeouts.Ack, DefaultAckTimeout)
	def(&c.Timeouts.Inactivity, DefaultInactivityTimeout)
	def(&c.Timeouts.DeadlineGrace, DefaultDeadlineGrace)
	def(&c.Timeouts.Control, DefaultControlTimeout)
	def(&c.Timeouts.InstanceProbe, DefaultInstanceProbe)
	def(&c.Timeouts.Registration, DefaultRegistration)
	def(&c.Retry.Initial, DefaultRetryInitial)
	def(&c.Retry.Max, DefaultRetryMax)
	def(&c.Breaker.OpenFor, DefaultBreakerOpenFor)
	if c.Retry.MaxRetries == 0 {
		c.Retry.MaxRetries = DefaultMaxRetries
	}
	if c.Retry.MaxRetries < 0 {
		c.Retry.MaxRetries = 0
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if c.Breaker.Failures == 0 {
		c.Breaker.Failures = DefaultBreakerFailures
	}
	return c
}

// Validate checks c's agents, timeouts and governance, and names the offending
// key of the config file in its error.
func (c Policy) Validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...))
	}
	if c.MaxOutputBytes < 0 {
		return bad("max_output_bytes", "must not be negative, got %d", c.MaxOutputBytes)
	}
	if err := c.validateGovernance(); err != nil {
		return err // it names the key
	}
	seen := map[string]bool{}
	for i, a := range c.Agents {
		if msg := envelope.CheckAgentID(a.ID); msg != "" {
			return bad(fmt.Sprintf("agents[%d].id", i), "%s", msg)
		}
		if seen[a.ID] {
			return bad(fmt.Sprintf("agents[%d].id", i), "%q is listed twice", a.ID)
		}
		seen[a.ID] = true
		if !a.Type.Valid() || a.Type == envelope.Orchestrator {
			return bad(fmt.Sprintf("agents[%d].type", i), "must be infra, desktop, code or research, got %q", a.Type)
		}
		if a.TokenFile == "" && a.Token == "" {
			return bad(fmt.Sprintf("agents[%d].token_file", i), "is required")
		}
		if a.OrchestratorTokenFile == "" && a.OrchestratorToken == "" {
			return bad(fmt.Sprintf("agents[%d].orchestrator_token_file", i), "is required: the orchestrator's token for this agent")
		}
		if a.PublicKey != "" && !nkeys.IsValidPublicUserKey(a.PublicKey) {
			return bad(fmt.Sprintf("agents[%d].public_key", i), "want a NATS user public key (56 characters starting with U)")
		}
	}
	durations := []struct {
		key string
		d   time.Duration
	}{
		{"timeouts.ack", c.Timeouts.Ack}, {"timeouts.inactivity", c.Timeouts.Inactivity},
		{"timeouts.deadline_grace", c.Timeouts.DeadlineGrace}, {"timeouts.control", c.Timeouts.Control},
		{"timeouts.instance_probe", c.Timeouts.InstanceProbe}, {"timeouts.registration", c.Timeouts.Registration},
		{"retry.initial", c.Retry.Initial}, {"retry.max", c.Retry.Max},
		{"breaker.open_for", c.Breaker.OpenFor},
	}
	for _, d := range durations {
		if d.d < 0 {
			return bad(d.key, "must not be negative, got %s", d.d)
		}
	}
	return nil
}

// validateGovernance checks the work_types and approval sections and each
// agent's limits.
func (c Policy) validateGovernance() error {
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

// AgentConfig is agentID's entry in the config, or nil.
func (c Policy) AgentConfig(agentID string) *AgentConfig {
	for i := range c.Agents {
		if c.Agents[i].ID == agentID {
			return &c.Agents[i]
		}
	}
	return nil
}
