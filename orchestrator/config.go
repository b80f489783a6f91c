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
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"go.yaml.in/yaml/v3"
)

// Config configures an orchestrator. LoadConfig reads it from YAML; the zero value of
// every duration and count means its default (see WithDefaults).
type Config struct {
	// ConfigVersion is the file's format (ConfigVersion); 0 reads as this
	// build's.
	ConfigVersion int `yaml:"config_version"`
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
	Agents []policy.AgentConfig `yaml:"agents"`
	// Timeouts bounds how long a dispatched task may stay silent.
	Timeouts policy.TimeoutConfig `yaml:"timeouts"`
	// Retry is the retry policy for 5001, 5002 and 5005.
	Retry policy.RetryConfig `yaml:"retry"`
	// Breaker is the per-agent circuit breaker policy.
	Breaker policy.BreakerConfig `yaml:"breaker"`
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
	WorkTypes map[string]policy.WorkTypeConfig `yaml:"work_types"`
	// Approval says how long a task waits for approval.
	Approval policy.ApprovalConfig `yaml:"approval"`
	// MaxOutputBytes caps the output kept of one task, in bytes: what an agent
	// streams or returns past it is dropped, neither stored nor streamed, and the
	// task says so (output_capped). 0 means 64 MiB, the agent's own default
	// max_output_bytes, so that only an agent that ignores its cap meets this one.
	MaxOutputBytes int64 `yaml:"max_output_bytes"`
	// Batches holds what batches wait for.
	Batches BatchesConfig `yaml:"batches"`
	// Workflows are workflows that the API lists and runs and cannot change
	// (workflowconfig.go).
	Workflows WorkflowsConfig `yaml:"workflows"`
	// Enroll names the keys an orchestrator of a site in NATS operator mode
	// enrolls and revokes identities with (enrollconfig.go).
	Enroll EnrollConfig `yaml:"enroll"`

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

// BatchesConfig holds what batches wait for.
type BatchesConfig struct {
	// RegisterGrace is how long a new batch waits for its configured agents
	// that have not registered yet (just after chiffon up, say): one that
	// registers in time gets its task, one that does not is unknown. 0 means
	// DefaultRegisterGrace; at most MaxRegisterGrace.
	RegisterGrace time.Duration `yaml:"register_grace"`
}

// DefaultRegisterGrace is BatchesConfig.RegisterGrace's default, and
// MaxRegisterGrace its bound: a batch's targets are not left waiting for long.
const (
	DefaultRegisterGrace = 15 * time.Second
	MaxRegisterGrace     = 10 * time.Minute
)

// DefaultRetention is Config.Retention's default.
const DefaultRetention = 7 * 24 * time.Hour

// WithDefaults returns c with every zero duration and count replaced by its default.
func (c Config) WithDefaults() Config {
	lc := c.lifecycle().WithDefaults()
	c.Timeouts, c.Retry, c.Breaker, c.MaxOutputBytes = lc.Timeouts, lc.Retry, lc.Breaker, lc.MaxOutputBytes
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Batches.RegisterGrace == 0 {
		c.Batches.RegisterGrace = DefaultRegisterGrace
	}
	if c.HA.Lease == 0 {
		c.HA.Lease = DefaultLease
	}
	c.HTTP.Limits = c.HTTP.Limits.WithDefaults()
	return c
}

// lifecycle is c's policy for the core (with no tokens read yet).
func (c Config) lifecycle() policy.Policy {
	return policy.Policy{Agents: c.Agents, Timeouts: c.Timeouts, Retry: c.Retry, Breaker: c.Breaker,
		WorkTypes: c.WorkTypes, Approval: c.Approval, MaxOutputBytes: c.MaxOutputBytes}
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
	if err := checkConfigVersion(b); err != nil {
		return Config{}, err
	}
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
	if err := c.Workflows.validate(); err != nil {
		return err
	}
	if err := c.HA.validate(c); err != nil {
		return err // it names the key
	}
	if c.Retention < 0 {
		return bad("retention", "must not be negative, got %s", c.Retention)
	}
	if g := c.Batches.RegisterGrace; g < 0 || g > MaxRegisterGrace {
		return bad("batches.register_grace", "must be from 0 (the default, %s) to %s, got %s",
			DefaultRegisterGrace, MaxRegisterGrace, g)
	}
	return c.lifecycle().Validate() // it names the key
}

// secrets are the tokens an orchestrator runs with, read from their files.
type secrets struct {
	// apiTokens are the API's tokens, api_token_file's first.
	apiTokens []httpapi.Token
	// agents are Config.Agents with each one's two tokens read.
	agents []policy.AgentConfig
}

func (c Config) readSecrets() (secrets, error) {
	s := secrets{agents: make([]policy.AgentConfig, 0, len(c.Agents))}
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
		if a.Token, err = read(a.Token, a.TokenFile, key+"token_file"); err != nil {
			return s, err
		}
		if a.OrchestratorToken, err = read(a.OrchestratorToken, a.OrchestratorTokenFile, key+"orchestrator_token_file"); err != nil {
			return s, err
		}
		if a.Token == a.OrchestratorToken {
			return s, fmt.Errorf("config: %sorchestrator_token_file: must differ from the agent's own token", key)
		}
		s.agents = append(s.agents, a)
	}
	return s, nil
}
