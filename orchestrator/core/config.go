package core

import (
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
)

// Config is what the core runs with: the task lifecycle's part of the
// orchestrator's config, with every agent's tokens read.
type Config struct {
	// ID is the orchestrator's orch_id.
	ID string
	// Subjects are the site's NATS subjects.
	Subjects broker.Subjects
	// Agents are the agents allowed in, with Token and OrchestratorToken set.
	Agents []AgentConfig
	// Instance, when set, names this orchestrator of a group in every message
	// to an agent (broker.HeaderInstance).
	Instance       string
	Timeouts       TimeoutConfig
	Retry          RetryConfig
	Breaker        BreakerConfig
	WorkTypes      map[string]WorkTypeConfig
	Approval       ApprovalConfig
	MaxOutputBytes int64
}

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
	DefaultMaxRetries        = 3
	DefaultRetryInitial      = time.Second
	DefaultRetryMax          = time.Minute
	DefaultBreakerFailures   = 5
	DefaultBreakerOpenFor    = 60 * time.Second
	// DefaultMaxOutputBytes is Config.MaxOutputBytes's default: 64 MiB, as the
	// agent's DefaultMaxOutputBytes (package agent, which this one does not
	// import). Keep the two equal.
	DefaultMaxOutputBytes = 64 << 20
)

// WithDefaults returns c with every zero duration and count replaced by its default.
func (c Config) WithDefaults() Config {
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
func (c Config) Validate() error {
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
	}
	durations := []struct {
		key string
		d   time.Duration
	}{
		{"timeouts.ack", c.Timeouts.Ack}, {"timeouts.inactivity", c.Timeouts.Inactivity},
		{"timeouts.deadline_grace", c.Timeouts.DeadlineGrace}, {"timeouts.control", c.Timeouts.Control},
		{"timeouts.instance_probe", c.Timeouts.InstanceProbe},
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
