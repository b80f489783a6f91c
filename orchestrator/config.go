package orchestrator

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/nats-io/nats.go"
	"gopkg.in/yaml.v3"
)

// Config configures an orchestrator. LoadConfig reads it from YAML; the zero value of
// every duration and count means its default (see WithDefaults).
type Config struct {
	// ID is the orchestrator's id (orch_id). Empty means the one kept in DataDir, or
	// a new one written there on first start.
	ID string `yaml:"id"`
	// NATS says where the broker is.
	NATS broker.NATSConfig `yaml:"nats"`
	// TokenFile holds the orchestrator's own bearer token, which agents check.
	TokenFile string `yaml:"token_file"`
	// APITokenFile holds the bearer token HTTP API clients must send.
	APITokenFile string `yaml:"api_token_file"`
	// HTTP configures the API server.
	HTTP HTTPConfig `yaml:"http"`
	// DataDir holds orch_id and the task store (<data_dir>/tasks).
	DataDir string `yaml:"data_dir"`
	// Agents lists every agent instance allowed in, with its token.
	Agents []AgentConfig `yaml:"agents"`
	// Timeouts bounds how long a dispatched task may stay silent.
	Timeouts TimeoutConfig `yaml:"timeouts"`
	// Retry is the retry policy for 5001, 5002 and 5005.
	Retry RetryConfig `yaml:"retry"`
	// Breaker is the per-agent circuit breaker policy.
	Breaker BreakerConfig `yaml:"breaker"`
	// Retention is how long finished tasks are kept; 0 means 7 days.
	Retention time.Duration `yaml:"retention"`

	// Token, APIToken and each AgentConfig.Token may be set directly (by tests or an
	// embedding program) instead of naming files.
	Token    string `yaml:"-"`
	APIToken string `yaml:"-"`
}

// HTTPConfig configures the API server.
type HTTPConfig struct {
	// Listen is the address of the HTTP API, such as "127.0.0.1:8080"; "" turns the
	// server off (Handler still serves the API for embedding programs).
	Listen string `yaml:"listen"`
}

// AgentConfig is one agent instance allowed in.
type AgentConfig struct {
	// ID is the agent's instance id.
	ID string `yaml:"id"`
	// TokenFile holds the agent's bearer token.
	TokenFile string `yaml:"token_file"`
	// Token is the token itself, when not read from TokenFile.
	Token string `yaml:"-"`
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
	DefaultRetention         = 7 * 24 * time.Hour
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
	def(&c.Retry.Initial, DefaultRetryInitial)
	def(&c.Retry.Max, DefaultRetryMax)
	def(&c.Breaker.OpenFor, DefaultBreakerOpenFor)
	def(&c.Retention, DefaultRetention)
	if c.Retry.MaxRetries == 0 {
		c.Retry.MaxRetries = DefaultMaxRetries
	}
	if c.Retry.MaxRetries < 0 {
		c.Retry.MaxRetries = 0
	}
	if c.Breaker.Failures == 0 {
		c.Breaker.Failures = DefaultBreakerFailures
	}
	return c
}

// LoadConfig reads a YAML config file strictly (an unknown key is an error) and
// validates it. Token files are read later, by Open.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return ParseConfig(b)
}

// ParseConfig decodes YAML config text strictly and validates it.
func ParseConfig(b []byte) (Config, error) {
	c, err := DecodeConfig(b)
	if err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// DecodeConfig decodes YAML config text strictly (an unknown key is an error) without
// validating it, so that flags can complete it first.
func DecodeConfig(b []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// Validate checks c and names the offending key in its error.
func (c Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...))
	}
	if c.ID != "" {
		if msg := envelope.CheckAgentID(c.ID); msg != "" {
			return bad("id", "%s", msg)
		}
	}
	if c.DataDir == "" {
		return bad("data_dir", "is required")
	}
	if c.TokenFile == "" && c.Token == "" {
		return bad("token_file", "is required")
	}
	if c.APITokenFile == "" && c.APIToken == "" {
		return bad("api_token_file", "is required")
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
		if a.TokenFile == "" && a.Token == "" {
			return bad(fmt.Sprintf("agents[%d].token_file", i), "is required")
		}
	}
	durations := []struct {
		key string
		d   time.Duration
	}{
		{"timeouts.ack", c.Timeouts.Ack}, {"timeouts.inactivity", c.Timeouts.Inactivity},
		{"timeouts.deadline_grace", c.Timeouts.DeadlineGrace}, {"timeouts.control", c.Timeouts.Control},
		{"retry.initial", c.Retry.Initial}, {"retry.max", c.Retry.Max},
		{"breaker.open_for", c.Breaker.OpenFor}, {"retention", c.Retention},
	}
	for _, d := range durations {
		if d.d < 0 {
			return bad(d.key, "must not be negative, got %s", d.d)
		}
	}
	return nil
}

// secrets are the tokens an orchestrator runs with, read from their files.
type secrets struct {
	token    string
	apiToken string
	agents   map[string]string
	// headers are the auth headers of a message to each agent, and to none (""),
	// built once and shared by every message (see broker.AuthHeader).
	headers map[string]nats.Header
}

// authHeader returns the headers of a message to agentID.
func (s *secrets) authHeader(agentID string) nats.Header {
	if h, ok := s.headers[agentID]; ok {
		return h
	}
	return broker.AuthHeader(s.token, agentID)
}

func (c Config) readSecrets() (secrets, error) {
	s := secrets{token: c.Token, apiToken: c.APIToken, agents: map[string]string{}}
	var err error
	if s.token == "" {
		if s.token, err = broker.ReadTokenFile(c.TokenFile); err != nil {
			return s, fmt.Errorf("config: token_file: %w", err)
		}
	}
	if s.apiToken == "" {
		if s.apiToken, err = broker.ReadTokenFile(c.APITokenFile); err != nil {
			return s, fmt.Errorf("config: api_token_file: %w", err)
		}
	}
	for i, a := range c.Agents {
		tok := a.Token
		if tok == "" {
			if tok, err = broker.ReadTokenFile(a.TokenFile); err != nil {
				return s, fmt.Errorf("config: agents[%d].token_file: %w", i, err)
			}
		}
		s.agents[a.ID] = tok
	}
	s.headers = map[string]nats.Header{"": broker.AuthHeader(s.token, "")}
	for id := range s.agents {
		s.headers[id] = broker.AuthHeader(s.token, id)
	}
	return s, nil
}
