package benchrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
)

// AgentsConfig says what `chiffon bench --agents` measures. Zero values mean the
// defaults.
type AgentsConfig struct {
	// Agents is the number of light agents (lightAgents); at least 1.
	Agents int
	// Heartbeat is the agents' heartbeat interval; 0 means
	// agent.DefaultHeartbeatInterval (5 s).
	Heartbeat time.Duration
	// IdleHeartbeats is the length of the window in which the orchestrator's CPU
	// is measured, in heartbeat intervals; 0 means 10.
	IdleHeartbeats int
	// TasksPerAgent is how many no-op tasks per agent the spread phase runs; 0
	// means 10.
	TasksPerAgent int
	// InFlight is how many tasks of the spread phase are in flight at once; 0
	// means 64.
	InFlight int
	// Executable is the chiffon binary run as the orchestrator; required.
	// ExecEnv is added to its environment.
	Executable string
	ExecEnv    []string
	// Progress receives one line per phase; nil means none.
	Progress io.Writer
}

func (c AgentsConfig) withDefaults() AgentsConfig {
	if c.Heartbeat <= 0 {
		c.Heartbeat = agent.DefaultHeartbeatInterval
	}
	if c.IdleHeartbeats <= 0 {
		c.IdleHeartbeats = 10
	}
	if c.TasksPerAgent <= 0 {
		c.TasksPerAgent = 10
	}
	if c.InFlight <= 0 {
		c.InFlight = 64
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// waitTimeout bounds each wait for the agents to register or be online: a minute,
// and 20 ms more per agent.
func (c AgentsConfig) waitTimeout() time.Duration {
	return time.Minute + time.Duration(c.Agents)*20*time.Millisecond
}

// AgentsResult holds every figure of `chiffon bench --agents`.
type AgentsResult struct {
	Agents     int     `json:"agents"`
	HeartbeatS float64 `json:"heartbeat_s"`
	// GOMAXPROCS is this process's, which runs the broker and the agents; the
	// orchestrator, a subprocess, has the machine's default.
	GOMAXPROCS int `json:"gomaxprocs"`
	// RegisterS is the time from the agents' start until the orchestrator
	// lists every one online.
	RegisterS float64        `json:"register_s"`
	Idle      IdleFigures    `json:"idle"`
	Restart   RestartFigures `json:"restart"`
	Spread    SpreadFigures  `json:"spread"`
	// BreakersOpened and AgentsWentOffline count, over the whole run, the
	// breakers the orchestrator opened and the agents it marked offline for
	// missed heartbeats.
	BreakersOpened    int `json:"breakers_opened"`
	AgentsWentOffline int `json:"agents_went_offline"`
}

// IdleFigures are the costs while the agents only heartbeat.
type IdleFigures struct {
	// WindowS is the measurement's window, in seconds.
	WindowS float64 `json:"window_s"`
	// OrchestratorCPUPct is the orchestrator's CPU time over the window, in
	// percent of one core.
	OrchestratorCPUPct float64 `json:"orchestrator_cpu_pct"`
	// BenchCPUPct is the same for this process: the agents and the broker.
	BenchCPUPct float64 `json:"bench_cpu_pct"`
	// OrchestratorRSSMiB is the orchestrator's resident memory at the window's
	// end, BenchRSSMiB this process's.
	OrchestratorRSSMiB float64 `json:"orchestrator_rss_mib"`
	BenchRSSMiB        float64 `json:"bench_rss_mib"`
	// LongestTickGapMS is the longest gap between two ticks of a 100 ms ticker
	// of this process in the window. Far over 100 says the machine stalled (or
	// starved this process): the CPU shares are then low, and agents may have
	// gone offline without a fault of Chiffon's.
	LongestTickGapMS float64 `json:"longest_tick_gap_ms"`
}

// RestartFigures are those of a restart of the broker on the same port.
type RestartFigures struct {
	// BrokerDownMS is from the broker's shutdown until it takes clients again.
	BrokerDownMS float64 `json:"broker_down_ms"`
	// ReregisterS is from then until the orchestrator logged the last of the
	// agents' registrations.
	ReregisterS float64 `json:"reregister_s"`
	// Reregistered is how many agents registered again; Online how many the
	// orchestrator then lists online.
	Reregistered int `json:"reregistered"`
	Online       int `json:"online"`
	// BreakersOpened counts the breakers that opened from the restart until
	// all were online again; BreakersNotClosed those listed not closed then.
	BreakersOpened    int `json:"breakers_opened"`
	BreakersNotClosed int `json:"breakers_not_closed"`
}

// SpreadFigures are how TasksPerAgent × Agents no-op tasks, through the API,
// spread over the agents.
type SpreadFigures struct {
	Tasks     int     `json:"tasks"`
	TasksPerS float64 `json:"tasks_per_s"`
	// Spread is the tasks per agent.
	Spread
	// BreakersOpened counts the breakers that opened meanwhile.
	BreakersOpened int `json:"breakers_opened"`
}

// RunAgents runs cfg.Agents light agents in this process against an orchestrator
// run as a subprocess of cfg.Executable, on an embedded broker in this process,
// and measures: the orchestrator's CPU while the agents only heartbeat, the time
// until they have all registered again after the broker restarts, and how
// no-op tasks spread over them.
func RunAgents(ctx context.Context, cfg AgentsConfig) (*AgentsResult, error) {
	cfg = cfg.withDefaults()
	if cfg.Agents < 1 {
		return nil, fmt.Errorf("--agents %d: at least 1", cfg.Agents)
	}
	if cfg.Executable == "" {
		return nil, errors.New("agents: no executable to run the orchestrator")
	}
	dir, err := os.MkdirTemp("", "chiffon-bench-agents-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, format+"\n", args...) }

	if smi, err := exec.LookPath("nvidia-smi"); err == nil {
		progress("note:    %s is on PATH: every agent runs it at each heartbeat, as a real one does", smi)
	}
	f, took, err := startFleet(ctx, dir, cfg)
	if err != nil {
		return nil, err
	}
	defer f.stop()
	res := &AgentsResult{Agents: cfg.Agents, HeartbeatS: cfg.Heartbeat.Seconds(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		RegisterS: took.Seconds()}
	progress("online:  %d agents in %.2f s", cfg.Agents, res.RegisterS)

	if res.Idle, err = f.idle(ctx); err != nil {
		return nil, fmt.Errorf("idle: %w", err)
	}
	progress("idle:    orchestrator %.2f%% of a core over %.0f s (this process, agents and broker: %.1f%%), RSS %.1f MiB; longest tick gap %.0f ms",
		res.Idle.OrchestratorCPUPct, res.Idle.WindowS, res.Idle.BenchCPUPct, res.Idle.OrchestratorRSSMiB, res.Idle.LongestTickGapMS)

	if res.Restart, err = f.restart(ctx); err != nil {
		return nil, fmt.Errorf("broker restart: %w", err)
	}
	r := res.Restart
	progress("restart: broker down %.0f ms; all %d registered again %.2f s after; %d breakers opened",
		r.BrokerDownMS, r.Reregistered, r.ReregisterS, r.BreakersOpened)

	if res.Spread, err = f.spread(ctx); err != nil {
		return nil, fmt.Errorf("spread: %w", err)
	}
	s := res.Spread
	progress("spread:  %d tasks at %.0f/s; per agent min %d, median %g, max %d",
		s.Tasks, s.TasksPerS, s.Min, s.Median, s.Max)
	res.BreakersOpened, res.AgentsWentOffline = f.log.counts()
	return res, nil
}
