package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"text/template"
	"time"

	"github.com/chiffon-dev/chiffon/agent/dedupe"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/worktype"
	"go.yaml.in/yaml/v3"
)

// Defaults applied by Config.withDefaults.
const (
	DefaultMaxConcurrency    = 4
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultKeepaliveInterval = 10 * time.Second
	DefaultDrainTimeout      = 60 * time.Second
	DefaultDedupeTTL         = 24 * time.Hour
	DefaultMaxOutputBytes    = 64 << 20
	DefaultGPUSampleInterval = time.Second
	// MinGPUSampleInterval is the shortest gpu.sample_interval: each sample
	// runs nvidia-smi.
	MinGPUSampleInterval = 50 * time.Millisecond
)

// A work type's cancel_grace (WorkTypeConfig.CancelGrace).
const (
	// DefaultCancelGrace is the grace of a work type that sets none.
	DefaultCancelGrace = 10 * time.Second
	// MaxCancelGrace bounds the grace: an agent's stop waits for it after the
	// drain timeout.
	MaxCancelGrace = 10 * time.Minute
)

// Duration is a time.Duration written in YAML as "5s" or "1h30m".
type Duration time.Duration

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration such as 5s or 10m", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Config is an agent's configuration, read from YAML by LoadConfig. Zero values mean
// the defaults above.
type Config struct {
	// ConfigVersion is the file's format (ConfigVersion); 0 reads as this
	// build's.
	ConfigVersion int `yaml:"config_version"`
	// ID is the agent instance id, used in subject names: letters, digits, '-', '_'.
	ID string `yaml:"id"`
	// Type is the agent type: infra, desktop, code or research.
	Type string `yaml:"type"`
	// Name is a human-readable name; "" means the host name.
	Name string `yaml:"name"`
	// NATS says where the broker is and which subject prefix to use.
	NATS broker.NATSConfig `yaml:"nats"`
	// TokenFile holds this agent's own token; OrchestratorTokenFile the orchestrator's.
	TokenFile             string `yaml:"token_file"`
	OrchestratorTokenFile string `yaml:"orchestrator_token_file"`
	// DataDir holds the dedupe cache (<data_dir>/dedupe).
	DataDir string `yaml:"data_dir"`
	// MaxConcurrency is how many tasks run at once.
	MaxConcurrency int `yaml:"max_concurrency"`
	// HeartbeatInterval is how often a heartbeat is published.
	HeartbeatInterval Duration `yaml:"heartbeat_interval"`
	// KeepaliveInterval is the longest silence of a running task's stream (at most 10s).
	KeepaliveInterval Duration `yaml:"keepalive_interval"`
	// DrainTimeout bounds how long running work may take to finish on shutdown.
	DrainTimeout Duration `yaml:"drain_timeout"`
	// DedupeTTL is how long a request's outcome is remembered.
	DedupeTTL Duration `yaml:"dedupe_ttl"`
	// MaxOutputBytes caps the output kept (and cached) per task; more is dropped.
	MaxOutputBytes int64 `yaml:"max_output_bytes"`
	// Capabilities are free-form tags sent in the registration.
	Capabilities []string `yaml:"capabilities"`
	// Labels describe the agent for selecting it, such as {site: attic, gpu:
	// "true"}: sent in the registration and shown by the orchestrator (keys of
	// lower-case letters, digits, '.', '_', '-'; values of printable ASCII; at
	// most 32, 63 characters each).
	Labels map[string]string `yaml:"labels"`
	// WorkTypes are the subprocess work types, by name.
	WorkTypes map[string]WorkTypeConfig `yaml:"work_types"`
	// GPU says how the agent finds its GPUs, measures its tasks' GPU memory
	// and shares the GPUs among tasks.
	GPU GPUConfig `yaml:"gpu"`
	// MetricsListen is the host:port on which Run serves Prometheus metrics at
	// GET /metrics, without authentication: bind it to loopback or a trusted
	// interface. "" (the default) serves none.
	MetricsListen string `yaml:"metrics_listen"`

	// Token and OrchestratorToken override the token files; never logged.
	Token             string `yaml:"-"`
	OrchestratorToken string `yaml:"-"`
	// Logger receives the agent's logs; nil means slog.Default().
	Logger *slog.Logger `yaml:"-"`
	// DedupeCache keeps the dedupe entries instead of a Badger cache in
	// <data_dir>/dedupe; nil means that one. The caller opens it, with its own TTL
	// (DedupeTTL does not apply), and closes it after Run: Run does not close it.
	DedupeCache dedupe.Cache `yaml:"-"`
}

// GPUConfig is the agent's gpu section. The zero value finds nvidia-smi on
// PATH, samples every second and gives each GPU to one task at a time.
type GPUConfig struct {
	// NVIDIASMI is the nvidia-smi program the agent asks about the GPUs; ""
	// means nvidia-smi on PATH. Without it, or when it fails, the agent has no
	// GPUs.
	NVIDIASMI string `yaml:"nvidia_smi"`
	// SampleInterval is how often a running subprocess task's GPU memory is
	// sampled; 0 means DefaultGPUSampleInterval, and it is at least
	// MinGPUSampleInterval.
	SampleInterval Duration `yaml:"sample_interval"`
	// Sharing is how tasks that need GPU memory share the GPUs: GPUExclusive
	// ("exclusive", the default, also ""), one such task per GPU at a time, or
	// GPUShared ("shared"), as many as a GPU's free memory covers.
	Sharing string `yaml:"sharing"`
}

// validate checks the gpu section; each error names its key.
func (g GPUConfig) validate(bad func(key, format string, args ...any)) {
	if d := time.Duration(g.SampleInterval); d != 0 && d < MinGPUSampleInterval {
		bad("gpu.sample_interval", "must be at least %s, got %s", MinGPUSampleInterval, d)
	}
	if g.Sharing != "" && g.Sharing != GPUExclusive && g.Sharing != GPUShared {
		bad("gpu.sharing", "must be %s or %s, got %q", GPUExclusive, GPUShared, g.Sharing)
	}
}

// WorkTypeConfig defines a work type run as a subprocess.
type WorkTypeConfig struct {
	// Description is shown to operators.
	Description string `yaml:"description"`
	// Command is the argv; each element is a text/template over the parameters,
	// such as "{{.playbook}}", or an optional group of them (Arg), left out when
	// a parameter it reads is absent. It never goes through a shell.
	Command []Arg `yaml:"command"`
	// AppendArgsFrom names a parameter holding a list of strings appended to argv.
	AppendArgsFrom string `yaml:"append_args_from"`
	// AllowOptionArgs lets parameters supply arguments that start with '-'. When
	// false (the default) a task is refused with ExitInvalidParameters if a
	// templated Command element or an AppendArgsFrom item would begin with '-', so
	// that a parameter cannot turn into an option of the command ("--output=FILE").
	// Literal elements and "--name={{.x}}" (the option fixed by the config) are
	// always allowed; an element such as "-{{.flag}}", where a parameter completes
	// an option, is a config error.
	AllowOptionArgs bool `yaml:"allow_option_args"`
	// Shell, when set instead of Command, is a script run by /bin/sh -c. Parameters
	// are not templated into it: read them from stdin, or from CHIFFON_PARAM_<NAME>,
	// which is set for the scalar parameters declared in Schema's top-level
	// properties only (none without a schema).
	Shell string `yaml:"shell"`
	// Dir is the working directory (templated like Command); "" means the agent's.
	// A templated Dir must stay under DirBase.
	Dir string `yaml:"dir"`
	// DirBase is the absolute directory a rendered Dir must be, or be below, after
	// cleaning and after resolving symlinks; otherwise the task is refused with
	// ExitInvalidParameters. "" means, for a templated Dir, its literal text before
	// the first "{{" up to its last '/' ("/srv/repos/{{.repo}}" → "/srv/repos/"),
	// which must be absolute.
	DirBase string `yaml:"dir_base"`
	// Env lists the agent's environment variables passed through; nothing else is.
	Env []string `yaml:"env"`
	// SetEnv are fixed variables set for the process.
	SetEnv map[string]string `yaml:"set_env"`
	// Timeout bounds one run; a request's max_duration_seconds may shorten it.
	Timeout Duration `yaml:"timeout"`
	// CancelGrace is how long the task's processes have to exit after SIGTERM when
	// the task is cancelled, passes its deadline or the agent stops; those still
	// running then are SIGKILLed. nil means DefaultCancelGrace; 0 SIGKILLs at once.
	// At most MaxCancelGrace.
	CancelGrace *Duration `yaml:"cancel_grace"`
	// Schema is a JSON Schema the parameters must satisfy. The agent sends it to
	// the orchestrator with Description in its registration: the orchestrator
	// checks submissions against it, and the CLI and the dashboard build typed
	// parameters from its top-level properties. A $ref may only point within it.
	Schema map[string]any `yaml:"schema"`
	// Approval "required" asks the orchestrator to hold every task of this work
	// type sent to this agent until an operator approves it, as the
	// orchestrator's approval_required for the agent does; "" asks nothing.
	Approval string `yaml:"approval"`
	// RunAs is a user name or numeric uid the process runs as, with that user's
	// gid and supplementary groups; "" means the agent's user. It is looked up
	// when the config is validated. Switching to another user needs an agent
	// running as root: otherwise the task fails to start.
	RunAs string `yaml:"run_as"`
	// GPUVRAMMB is the GPU memory, in MiB, every task of the work type needs on
	// one GPU: the agent runs such a task only on a GPU that can give it that
	// much, and sets its CUDA_VISIBLE_DEVICES to that GPU. A request's
	// x_custom_fields.gpu_vram_mb takes its place. 0 means no need.
	GPUVRAMMB int64 `yaml:"gpu_vram_mb"`
}

// ConfigVersion is the format of the config files this build reads and
// `chiffon init` writes (config_version); a file without the key is read as
// this one, a newer one is refused. The first release's agent configs read as
// they are.
const ConfigVersion = 2

// LoadConfig reads and validates a YAML config file. Unknown keys are errors.
func LoadConfig(path string) (Config, error) {
	c, err := ReadConfig(path)
	if err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// ReadConfig reads a YAML config file without validating it, so that flags and
// environment variables can fill in keys before New validates. Unknown keys are
// errors.
func ReadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig decodes YAML config text strictly (an unknown key is an error) without
// validating it.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return c, err
	}
	return c, nil
}

// maxGPUVRAMMB bounds a work type's gpu_vram_mb as the wire bounds a request's.
const maxGPUVRAMMB = 1 << 40

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
var workTypePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// Validate checks the config; each error names the offending key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.ConfigVersion > ConfigVersion {
		bad("config_version", "%d is a newer chiffon's; this build reads up to %d", c.ConfigVersion, ConfigVersion)
	}
	if !idPattern.MatchString(c.ID) {
		bad("id", "must be 1-64 letters, digits, '-' or '_', got %q", c.ID)
	}
	if t := envelope.AgentType(c.Type); !t.Valid() || t == envelope.Orchestrator {
		bad("type", "must be infra, desktop, code or research, got %q", c.Type)
	}
	if len(c.NATS.URLs) == 0 {
		bad("nats.urls", "at least one URL is required")
	}
	if c.Token == "" && c.TokenFile == "" {
		bad("token_file", "is required")
	}
	if c.OrchestratorToken == "" && c.OrchestratorTokenFile == "" {
		bad("orchestrator_token_file", "is required")
	}
	if c.DataDir == "" {
		bad("data_dir", "is required")
	}
	if c.MaxConcurrency < 0 {
		bad("max_concurrency", "must not be negative")
	}
	if len(c.Labels) > envelope.MaxLabels {
		bad("labels", "at most %d labels, got %d", envelope.MaxLabels, len(c.Labels))
	}
	for _, k := range slices.Sorted(maps.Keys(c.Labels)) {
		if msg := envelope.CheckLabel(k, c.Labels[k]); msg != "" {
			bad("labels."+k, "%s", msg)
		}
	}
	if c.KeepaliveInterval < 0 || time.Duration(c.KeepaliveInterval) > 10*time.Second {
		bad("keepalive_interval", "must be at most 10s")
	}
	for key, d := range map[string]Duration{"heartbeat_interval": c.HeartbeatInterval, "drain_timeout": c.DrainTimeout, "dedupe_ttl": c.DedupeTTL} {
		if d < 0 {
			bad(key, "must not be negative")
		}
	}
	if c.MaxOutputBytes < 0 {
		bad("max_output_bytes", "must not be negative")
	}
	c.GPU.validate(bad)
	if c.MetricsListen != "" {
		if err := checkListenAddr(c.MetricsListen); err != nil {
			bad("metrics_listen", "%v", err)
		}
	}
	for name, wt := range c.WorkTypes {
		key := "work_types." + name
		if !workTypePattern.MatchString(name) {
			bad(key, "a work type name is lower-case [a-z][a-z0-9_]*")
		}
		if builtinNames[name] {
			bad(key, "%s is a built-in work type", name)
		}
		if err := wt.validate(); err != nil {
			bad(key, "%v", err)
		}
	}
	return errors.Join(errs...)
}

func (w *WorkTypeConfig) validate() error {
	switch {
	case len(w.Command) == 0 && w.Shell == "":
		return errors.New("command or shell is required")
	case len(w.Command) > 0 && w.Shell != "":
		return errors.New("command and shell are exclusive")
	case w.Timeout < 0:
		return errors.New("timeout must not be negative")
	case w.CancelGrace != nil && *w.CancelGrace < 0:
		return errors.New("cancel_grace must not be negative")
	case w.CancelGrace != nil && time.Duration(*w.CancelGrace) > MaxCancelGrace:
		return fmt.Errorf("cancel_grace must be at most %v, got %v", MaxCancelGrace, time.Duration(*w.CancelGrace))
	case w.GPUVRAMMB < 0 || w.GPUVRAMMB > maxGPUVRAMMB:
		return fmt.Errorf("gpu_vram_mb must be from 0 (none) to %d MiB", int64(maxGPUVRAMMB))
	}
	if _, err := newSubprocess("check", *w); err != nil {
		return err
	}
	if w.Schema != nil {
		if _, err := worktype.Compile(w.Schema); err != nil {
			return fmt.Errorf("schema: %w", err)
		}
	}
	_, err := w.spec().Compile() // description and approval
	return err
}

// CheckDir reports, naming it, a dir of the work type that is not a directory
// on this host: Dir when it is literal, else the base a templated Dir stays
// under. The work type's tasks fail until it is there. nil without a Dir, and
// for a Dir that Validate refuses.
func (w WorkTypeConfig) CheckDir() error {
	t, err := template.New("dir").Parse(w.Dir)
	if err != nil || w.Dir == "" {
		return nil
	}
	dir := w.Dir
	if templated(t) {
		if dir, err = dirBaseOf(w, t); err != nil {
			return nil
		}
	}
	return checkDir(dir, "")
}

// cancelGrace is CancelGrace, or its default when unset.
func (w *WorkTypeConfig) cancelGrace() time.Duration {
	if w.CancelGrace == nil {
		return DefaultCancelGrace
	}
	return time.Duration(*w.CancelGrace)
}

// spec is what the registration's catalogue says of the work type.
func (w *WorkTypeConfig) spec() worktype.Spec {
	return worktype.Spec{Description: w.Description, Parameters: w.Schema, Approval: w.Approval,
		StopGraceMS: w.cancelGrace().Milliseconds()}
}

// withDefaults returns c with zero values replaced by defaults.
func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name, _ = os.Hostname()
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = Duration(DefaultHeartbeatInterval)
	}
	if c.KeepaliveInterval == 0 {
		c.KeepaliveInterval = Duration(DefaultKeepaliveInterval)
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = Duration(DefaultDrainTimeout)
	}
	if c.DedupeTTL == 0 {
		c.DedupeTTL = Duration(DefaultDedupeTTL)
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if c.GPU.SampleInterval == 0 {
		c.GPU.SampleInterval = Duration(DefaultGPUSampleInterval)
	}
	if c.GPU.Sharing == "" {
		c.GPU.Sharing = GPUExclusive
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
