package orchestrator

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/httpapi"
	"github.com/chiffon-dev/chiffon/orchestrator/httplimit"
	"github.com/nats-io/nats.go"
	"go.yaml.in/yaml/v3"
)

// Config configures an orchestrator. LoadConfig reads it from YAML; the zero value of
// every duration and count means its default (see WithDefaults).
type Config struct {
	// ID is the orchestrator's id (orch_id). Empty means the one kept in DataDir, or
	// a new one written there on first start.
	ID string `yaml:"id"`
	// NATS says where the broker is and with which identity to connect.
	NATS broker.NATSConfig `yaml:"nats"`
	// APITokenFile holds the bearer token HTTP API clients must send: an
	// operator's, which may submit and cancel.
	APITokenFile string `yaml:"api_token_file"`
	// APITokens are more API tokens, each with its role (roles.go, package httpapi).
	APITokens []APITokenConfig `yaml:"api_tokens"`
	// HTTP configures the API server.
	HTTP HTTPConfig `yaml:"http"`
	// UI places the web dashboard.
	UI UIConfig `yaml:"ui"`
	// Webhooks are the receivers of the orchestrator's events (webhooks.go).
	Webhooks []WebhookConfig `yaml:"webhooks"`
	// DataDir holds orch_id and the task store (<data_dir>/tasks).
	DataDir string `yaml:"data_dir"`
	// Agents lists every agent instance allowed in, with its type and its pair of
	// tokens.
	Agents []AgentConfig `yaml:"agents"`
	// Timeouts bounds how long a dispatched task may stay silent.
	Timeouts TimeoutConfig `yaml:"timeouts"`
	// Retry is the retry policy for 5001, 5002 and 5005.
	Retry RetryConfig `yaml:"retry"`
	// Breaker is the per-agent circuit breaker policy.
	Breaker BreakerConfig `yaml:"breaker"`
	// Retention is how long finished tasks are kept; 0 means 7 days.
	Retention time.Duration `yaml:"retention"`
	// Store chooses where tasks are kept: this host's Badger (the default) or the
	// broker's JetStream.
	Store StoreConfig `yaml:"store"`
	// HA runs this orchestrator as one of several sharing the JetStream store,
	// one of them leading (see ha.go).
	HA HAConfig `yaml:"ha"`
	// WorkTypes holds, per work type, limits for every agent and whether it
	// waits for approval (governance.go).
	WorkTypes map[string]WorkTypeConfig `yaml:"work_types"`
	// Approval says how long a task waits for approval.
	Approval ApprovalConfig `yaml:"approval"`
	// MaxOutputBytes caps the output kept of one task, in bytes: what an agent
	// streams or returns past it is dropped, neither stored nor streamed, and the
	// task says so (output_capped). 0 means 64 MiB, the agent's own default
	// max_output_bytes, so that only an agent that ignores its cap meets this one.
	MaxOutputBytes int64 `yaml:"max_output_bytes"`

	// APIToken and each AgentConfig's tokens may be set directly (by tests or an
	// embedding program) instead of naming files.
	APIToken string `yaml:"-"`
}

// HTTPConfig configures the API server.
type HTTPConfig struct {
	// Listen is the address of the HTTP API, such as "127.0.0.1:8080"; "" turns the
	// server off (Handler still serves the API for embedding programs).
	Listen string `yaml:"listen"`
	// TLS, when its files are set, serves the API over HTTPS (TLS 1.2 or later);
	// unset, the API is plain HTTP.
	TLS TLSConfig `yaml:"tls"`
	// Limits bound the connections and event streams clients hold open, and how
	// long a request may take (package httplimit).
	Limits httplimit.Limits `yaml:"limits"`
	// Insecure allows plain HTTP on an address beyond loopback, such as behind a
	// proxy that ends TLS on the same host. Without it, listening beyond loopback
	// requires TLS: API tokens and dashboard cookies would cross the network in
	// the clear. false by default.
	Insecure bool `yaml:"insecure"`
}

// UIConfig places the web dashboard on the API's server.
type UIConfig struct {
	// Path is where the dashboard is served, such as "/" (the default) or
	// "/ui/"; it must start and end with "/" and not be under /api/.
	Path string `yaml:"path"`
}

func (c UIConfig) path() string {
	if c.Path == "" {
		return "/"
	}
	return c.Path
}

func (c UIConfig) validate() error {
	p := c.path()
	if !strings.HasPrefix(p, "/") || !strings.HasSuffix(p, "/") || strings.HasPrefix(p, "/api/") ||
		strings.ContainsAny(p, " {}?#") {
		return fmt.Errorf("config: ui.path: must start and end with / and lie outside /api/, got %q", c.Path)
	}
	return nil
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
	DefaultRetention         = 7 * 24 * time.Hour
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
	def(&c.Retention, DefaultRetention)
	def(&c.HA.Lease, DefaultLease)
	c.HTTP.Limits = c.HTTP.Limits.WithDefaults()
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
	if c.APITokenFile == "" && c.APIToken == "" {
		return bad("api_token_file", "is required")
	}
	for i, t := range c.APITokens {
		if err := t.validate(fmt.Sprintf("api_tokens[%d]", i)); err != nil {
			return err
		}
	}
	if err := c.HTTP.Validate(); err != nil {
		return err // it names the key
	}
	if err := c.UI.validate(); err != nil {
		return err
	}
	for i, w := range c.Webhooks {
		if err := w.validate(fmt.Sprintf("webhooks[%d]", i)); err != nil {
			return err
		}
	}
	if err := c.Store.Validate(); err != nil {
		return err // it names the key
	}
	if err := c.HA.validate(c); err != nil {
		return err // it names the key
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
	// apiTokens are the API's tokens, api_token_file's first.
	apiTokens []httpapi.Token
	agents    map[string]agentSecrets
}

// agentToken is the token the sender naming agent id must present, and whether the
// id is configured: what broker.Authenticator asks.
func (s secrets) agentToken(id string) (string, bool) {
	a, ok := s.agents[id]
	return a.token, ok
}

// agentSecrets are what the orchestrator holds for one agent.
type agentSecrets struct {
	typ envelope.AgentType
	// token is the agent's, checked on what it sends.
	token string
	// header carries the orchestrator's token for the agent and its id, built
	// once and shared by every message to it (see broker.AuthHeader).
	header nats.Header
}

// authHeader returns the headers of a message to agentID, and false for an
// agent not in the config, to which nothing may be sent.
func (s *secrets) authHeader(agentID string) (nats.Header, bool) {
	a, ok := s.agents[agentID]
	return a.header, ok
}

func (c Config) readSecrets() (secrets, error) {
	s := secrets{agents: map[string]agentSecrets{}}
	var err error
	if s.apiTokens, err = c.readAPITokens(); err != nil {
		return s, err
	}
	read := func(tok, file, key string) (string, error) {
		if tok != "" {
			return tok, nil
		}
		tok, err := broker.ReadTokenFile(file)
		if err != nil {
			return "", fmt.Errorf("config: %s: %w", key, err)
		}
		return tok, nil
	}
	for i, a := range c.Agents {
		key := fmt.Sprintf("agents[%d].", i)
		tok, err := read(a.Token, a.TokenFile, key+"token_file")
		if err != nil {
			return s, err
		}
		orchTok, err := read(a.OrchestratorToken, a.OrchestratorTokenFile, key+"orchestrator_token_file")
		if err != nil {
			return s, err
		}
		if tok == orchTok {
			return s, fmt.Errorf("config: %sorchestrator_token_file: must differ from the agent's own token", key)
		}
		s.agents[a.ID] = agentSecrets{typ: a.Type, token: tok, header: broker.AuthHeader(orchTok, a.ID)}
	}
	return s, nil
}
