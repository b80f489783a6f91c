package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"golang.org/x/time/rate"
)

// AgentConfig is one agent instance allowed in. Each agent has a pair of tokens:
// its own, which it sends, and the orchestrator's for it, which the orchestrator
// sends to it and no other agent accepts. A host that holds one agent's files
// thus holds no credential that another agent accepts.
type AgentConfig struct {
	// ID is the agent's instance id.
	ID string `yaml:"id"`
	// Type is the agent type the id is bound to: a registration as another type is
	// refused.
	Type envelope.AgentType `yaml:"type"`
	// TokenFile holds the agent's bearer token.
	TokenFile string `yaml:"token_file"`
	// OrchestratorTokenFile holds the orchestrator's token for this agent.
	OrchestratorTokenFile string `yaml:"orchestrator_token_file"`
	// Token and OrchestratorToken are the tokens themselves, when not read from
	// the files.
	Token             string `yaml:"-"`
	OrchestratorToken string `yaml:"-"`
	// AllowedWorkTypes, when set, are the only work types the agent is sent: a
	// registration offering more is trimmed to them (with a warning).
	AllowedWorkTypes []string `yaml:"allowed_work_types"`
	// MaxConcurrency caps the tasks it is sent at once, below what it registers
	// with; 0 means what it registers with.
	MaxConcurrency int `yaml:"max_concurrency"`
	// Limits bound how often and how large the work sent to it is.
	Limits `yaml:",inline"`
	// ApprovalRequired are work types that wait for an operator's yes before
	// they are sent to this agent.
	ApprovalRequired []string `yaml:"approval_required"`
	// PublicKey is the agent's NATS user public key on a site in operator
	// mode (chiffon init --operator writes it): chiffon agent revoke revokes
	// it at the broker.
	PublicKey string `yaml:"public_key"`
}

// Allowed is what of offered an agent configured with a may be sent, and what
// it may not: all of it when a (nil: an agent not in the config) sets no
// allowed_work_types.
func (a *AgentConfig) Allowed(offered []string) (kept, dropped []string) {
	if a == nil || len(a.AllowedWorkTypes) == 0 {
		return offered, nil
	}
	for _, w := range offered {
		if slices.Contains(a.AllowedWorkTypes, w) {
			kept = append(kept, w)
		} else {
			dropped = append(dropped, w)
		}
	}
	return kept, dropped
}

// Capacity is the capacity of an agent configured with a (nil: not in the
// config) that says it has room for n tasks: n, or its max_concurrency when
// that is lower; at least 1.
func (a *AgentConfig) Capacity(n int) int {
	if a != nil && a.MaxConcurrency > 0 && a.MaxConcurrency < n {
		n = a.MaxConcurrency
	}
	return max(n, 1)
}

// TimeoutConfig bounds how long a dispatched task may stay silent.
type TimeoutConfig struct {
	// Ack is how long the first message of a dispatch may take; 0 means 30 s.
	Ack time.Duration `yaml:"ack"`
	// Inactivity is the longest gap between two messages of a task; 0 means 30 s.
	Inactivity time.Duration `yaml:"inactivity"`
	// DeadlineGrace is added to hints.max_duration_seconds so that the agent's own
	// deadline result (exit code 124) arrives first; 0 means 5 s.
	DeadlineGrace time.Duration `yaml:"deadline_grace"`
	// Control bounds a cancel or ping request; 0 means 5 s.
	Control time.Duration `yaml:"control"`
	// InstanceProbe is how long the ping that checks a new agent process is the
	// only one with its id waits for other answers, once that process has
	// answered; 0 means 500 ms.
	InstanceProbe time.Duration `yaml:"instance_probe"`
	// Registration is how long a core that has just started (the orchestrator
	// started, or took over its group's lead) waits for the configured agents
	// of a type to register: meanwhile a task that no online agent can take
	// waits in the queue instead of spending a retry on 5002 (or failing on
	// 5006 while an agent that may offer its work type is still to come).
	// 0 means 10 s.
	Registration time.Duration `yaml:"registration"`
}

// RetryConfig is the retry policy for the retryable codes 5001, 5002 and 5005.
type RetryConfig struct {
	// MaxRetries is the number of retries after the first attempt; 0 means 3, and a
	// negative value turns retries off.
	MaxRetries int `yaml:"max_retries"`
	// Initial is the first wait; 0 means 1 s. Each next wait doubles it.
	Initial time.Duration `yaml:"initial"`
	// Max caps one wait; 0 means 1 minute.
	Max time.Duration `yaml:"max"`
}

// BreakerConfig is the per-agent circuit breaker policy.
type BreakerConfig struct {
	// Failures is how many consecutive 5001/5002 open the breaker; 0 means 5.
	Failures uint32 `yaml:"failures"`
	// OpenFor is how long the breaker stays open before its half-open ping; 0 means
	// 60 s.
	OpenFor time.Duration `yaml:"open_for"`
}

// Defaults of Config.
const (
	DefaultAckTimeout        = 30 * time.Second
	DefaultInactivityTimeout = 30 * time.Second
	DefaultDeadlineGrace     = 5 * time.Second
	DefaultControlTimeout    = 5 * time.Second
	DefaultRegistration      = 10 * time.Second
	DefaultMaxRetries        = 3
	DefaultRetryInitial      = time.Second
	DefaultRetryMax          = time.Minute
	DefaultBreakerFailures   = 5
	DefaultBreakerOpenFor    = 60 * time.Second
	// DefaultInstanceProbe is TimeoutConfig.InstanceProbe's default: how long
	// a probe waits for an answer from another process after the registering
	// one has answered.
	DefaultInstanceProbe = 500 * time.Millisecond
	// DefaultMaxOutputBytes is Policy.MaxOutputBytes's default: 64 MiB, as the
	// agent's DefaultMaxOutputBytes (package agent, which this one does not
	// import). Keep the two equal.
	DefaultMaxOutputBytes = 64 << 20
)

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

// Expiry is how long an approval waits: ExpiresAfter, or 24 h when unset.
func (c ApprovalConfig) Expiry() time.Duration {
	if c.ExpiresAfter <= 0 {
		return 24 * time.Hour
	}
	return c.ExpiresAfter
}

// ParseRate reads a rate limit: "N/s", "N/m" or "N/h" with N from 1.
func ParseRate(s string) (rate.Limit, error) {
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
		if _, err := ParseRate(l.RateLimit); err != nil {
			return fmt.Errorf("config: %s.rate_limit: %w", key, err)
		}
	}
	if l.MaxRequestBytes < 0 {
		return fmt.Errorf("config: %s.max_request_bytes: must not be negative", key)
	}
	return nil
}
