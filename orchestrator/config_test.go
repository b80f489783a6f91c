package orchestrator_test

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/httplimit"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
)

func TestExampleConfigLoads(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	cfg, err := orchestrator.LoadConfig(filepath.Join(filepath.Dir(file), "..", "examples", "orchestrator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Agents) != 2 || cfg.Timeouts.Ack != 30*time.Second || cfg.Retry.MaxRetries != 3 ||
		cfg.Breaker.Failures != 5 || cfg.Retention != 7*24*time.Hour || cfg.HTTP.Listen == "" {
		t.Fatalf("example config: %+v", cfg)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	base := "data_dir: /d\napi_token_file: /a\n"
	agentA := "{id: a, type: code, token_file: f, orchestrator_token_file: g}"
	cases := map[string]string{
		base + "colour: red\n":                                             "colour",
		base + "token_file: /t\n":                                          "token_file",
		base + "timeouts:\n  ack: soon\n":                                  "soon",
		base + "timeouts:\n  ack: -1s\n":                                   "timeouts.ack",
		"api_token_file: /a\n":                                             "data_dir",
		"data_dir: /d\n":                                                   "api_token_file",
		base + "agents:\n  - id: 'a b'\n":                                  "agents[0].id",
		base + "agents:\n  - {id: a, type: code}\n":                        "agents[0].token_file",
		base + "agents:\n  - {id: a, type: code, token_file: f}\n":         "agents[0].orchestrator_token_file",
		base + "agents:\n  - {id: a, token_file: f}\n":                     "agents[0].type",
		base + "agents:\n  - {id: a, type: printer, token_file: f}\n":      "agents[0].type",
		base + "agents:\n  - {id: a, type: orchestrator, token_file: f}\n": "agents[0].type",
		base + "id: 'x.y'\n":                                               "id",
		base + "agents:\n  - " + agentA + "\n  - " + agentA + "\n":         "agents[1].id",
		base + "store:\n  kind: etcd\n":                                    "store.kind",
		base + "max_output_bytes: -1\n":                                    "max_output_bytes",
		base + "store:\n  jetstream:\n    stream: 'a.b'\n":                 "store.jetstream.stream",
		base + "store:\n  jetstream:\n    subject_prefix: 'a.>'\n":         "store.jetstream.subject_prefix",
		base + "store:\n  jetstream:\n    replicas: 2\n":                   "store.jetstream.replicas",
		// Governance: limits per agent and per work type.
		base + "work_types:\n  Echo: {rate_limit: 5/s}\n":                            "work_types.Echo",
		base + "work_types:\n  echo: {rate_limit: 5/d}\n":                            "work_types.echo.rate_limit",
		base + "work_types:\n  echo: {rate_limit: 0/s}\n":                            "work_types.echo.rate_limit",
		base + "work_types:\n  echo: {max_request_bytes: -1}\n":                      "work_types.echo.max_request_bytes",
		base + "work_types:\n  echo: {rate: 5/s}\n":                                  "rate",
		base + "agents:\n  - {id: a, type: code, rate_limit: fast}\n":                "agents[0].rate_limit",
		base + "agents:\n  - {id: a, type: code, max_request_bytes: -5}\n":           "agents[0].max_request_bytes",
		base + "agents:\n  - {id: a, type: code, max_concurrency: -1}\n":             "agents[0].max_concurrency",
		base + "agents:\n  - {id: a, type: code, allowed_work_types: [echo, 'B']}\n": "agents[0].allowed_work_types[1]",
		// The API server's limits.
		base + "http:\n  limits: {read_timeout: -1s}\n":         "http.limits.read_timeout",
		base + "http:\n  limits: {idle_timeout: -1s}\n":         "http.limits.idle_timeout",
		base + "http:\n  limits: {max_connections: -1}\n":       "http.limits.max_connections",
		base + "http:\n  limits: {max_streams_per_token: -1}\n": "http.limits.max_streams_per_token",
		base + "http:\n  limits: {max_streams: -1}\n":           "http.limits.max_streams",
		base + "http:\n  limits: {max_conns: 5}\n":              "max_conns",
		// Batches.
		base + "batches:\n  register_grace: -1s\n": "batches.register_grace",
		base + "batches:\n  register_grace: 11m\n": "batches.register_grace",
	}
	for in, key := range cases {
		_, err := orchestrator.ParseConfig([]byte(in))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: error %v does not name %s", in, err, key)
		}
	}
}

func TestDefaults(t *testing.T) {
	c := orchestrator.Config{}.WithDefaults()
	if c.Timeouts.Ack != 30*time.Second || c.Timeouts.Inactivity != 30*time.Second || c.Retry.Initial != time.Second ||
		c.Retry.MaxRetries != 3 || c.Breaker.Failures != 5 || c.Breaker.OpenFor != time.Minute {
		t.Fatalf("defaults %+v", c)
	}
	// Only an agent that ignores its own cap meets the orchestrator's.
	if c.MaxOutputBytes != agent.DefaultMaxOutputBytes || policy.DefaultMaxOutputBytes != agent.DefaultMaxOutputBytes {
		t.Fatalf("max_output_bytes defaults to %d, the agent's to %d", c.MaxOutputBytes, agent.DefaultMaxOutputBytes)
	}
	want := httplimit.Limits{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 60 * time.Second, MaxConnections: 1024,
		MaxStreamsPerToken: 128, MaxStreams: 512}
	if c.HTTP.Limits != want {
		t.Fatalf("http.limits defaults %+v, want %+v", c.HTTP.Limits, want)
	}
	if c.Batches.RegisterGrace != orchestrator.DefaultRegisterGrace {
		t.Fatalf("batches.register_grace defaults to %s", c.Batches.RegisterGrace)
	}
	set := httplimit.Limits{ReadTimeout: time.Second, MaxStreams: 3}
	if got := (orchestrator.Config{HTTP: orchestrator.HTTPConfig{Limits: set}}).WithDefaults().HTTP.Limits; got.ReadTimeout != time.Second || got.MaxStreams != 3 || got.IdleTimeout != 60*time.Second {
		t.Fatalf("http.limits with two set: %+v", got)
	}
}
