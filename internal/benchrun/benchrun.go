// Package benchrun measures Chiffon against raw NATS on one server (or one node of a
// cluster, for tasks kept in a replicated JetStream stream), in one process:
// the request/reply baseline, end-to-end no-op tasks through the orchestrator and an
// agent, the same through the HTTP API, chunked output, and memory. The chiffon
// command's bench subcommand runs it; each phase lives in its own file.
package benchrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/internal/stack"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/nats-io/nats.go"
)

// Config says what to measure. Zero values mean the defaults.
type Config struct {
	// NATSURL is the server to use; "" starts an embedded one on 127.0.0.1.
	NATSURL string
	// Tasks is the number of tasks (or raw requests) per phase; 0 means 2000.
	Tasks int
	// InFlight is the concurrency of the throughput runs; 0 means 64.
	InFlight int
	// Size is the payload size in bytes of each request and reply; 0 means 256.
	Size int
	// ChunkBytes is the output of the chunks phase's one task; 0 means 10 MiB.
	ChunkBytes int
	// Executable is the chiffon binary started for the idle-RSS figures; "" skips
	// them. ExecEnv is added to its environment.
	Executable string
	ExecEnv    []string
	// Progress receives one line per phase; nil means none.
	Progress io.Writer
	// Store is the orchestrator's task store: orchestrator.StoreBadger (""
	// too) or orchestrator.StoreJetStream, for which the embedded server runs
	// JetStream (a server given by NATSURL must run it).
	Store string
	// Replicas is the JetStream store's number of replicas: 0 or 1 for one copy,
	// 3 or 5 for a stream replicated across as many nodes. The embedded broker is
	// then a cluster of that many nodes in this process (a server given by NATSURL
	// must be part of such a cluster). Only with StoreJetStream.
	Replicas int
	// ThroughputOnly stops Run after the raw and chiffon phases: one point of
	// the scale curve (RunScale).
	ThroughputOnly bool
}

func (c Config) withDefaults() Config {
	if c.Tasks <= 0 {
		c.Tasks = 2000
	}
	if c.InFlight <= 0 {
		c.InFlight = 64
	}
	if c.Size <= 0 {
		c.Size = 256
	}
	if c.ChunkBytes <= 0 {
		c.ChunkBytes = 10 << 20
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// Result holds every figure of one run. Rates are per second, latencies in
// microseconds, memory in MiB.
type Result struct {
	Tasks    int `json:"tasks"`
	InFlight int `json:"inflight"`
	Size     int `json:"size_bytes"`
	// GOMAXPROCS is the Go scheduler's processors during the run.
	GOMAXPROCS int `json:"gomaxprocs"`
	// Replicas is the number of replicas of the JetStream store's stream, as
	// the broker reports it after the run; 0 with Badger.
	Replicas int `json:"replicas,omitempty"`

	RawTasksPerS float64 `json:"raw_tasks_per_s"`
	RawP50US     float64 `json:"raw_p50_us"`
	RawP99US     float64 `json:"raw_p99_us"`

	ChiffonTasksPerS float64 `json:"chiffon_tasks_per_s"`
	ChiffonP50US     float64 `json:"chiffon_p50_us"`
	ChiffonP99US     float64 `json:"chiffon_p99_us"`
	// ChiffonCPUUSPerTask is this process's CPU time (user and system, every
	// part: broker, orchestrator, agent) per task of the throughput run, in
	// microseconds; RawCPUUSPerReq is the same for raw's requests. Where
	// throughput is bound by the CPU, tasks/s × this figure is the cores busy.
	ChiffonCPUUSPerTask float64 `json:"chiffon_cpu_us_per_task"`
	RawCPUUSPerReq      float64 `json:"raw_cpu_us_per_req"`

	// ThroughputRatio is chiffon / raw tasks per second at the same concurrency;
	// LatencyRatio is chiffon p50 / raw p50, one at a time.
	ThroughputRatio float64 `json:"throughput_ratio"`
	LatencyRatio    float64 `json:"latency_ratio"`

	APITasksPerS float64 `json:"api_tasks_per_s"`
	APIP50US     float64 `json:"api_p50_us"`

	ChunkMiBPerS float64 `json:"chunk_mib_per_s"`

	PeakRSSMiB             float64 `json:"peak_rss_mib"`
	IdleAgentRSSMiB        float64 `json:"idle_agent_rss_mib,omitempty"`
	IdleOrchestratorRSSMiB float64 `json:"idle_orchestrator_rss_mib,omitempty"`
}

// Run runs every phase in order (only raw and chiffon with cfg.ThroughputOnly)
// and returns the figures.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "chiffon-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	url := cfg.NATSURL
	if url == "" {
		var stop func()
		if url, stop, err = startBroker(ctx, filepath.Join(dir, "nats"), cfg); err != nil {
			return nil, err
		}
		defer stop()
	}
	res := &Result{Tasks: cfg.Tasks, InFlight: cfg.InFlight, Size: cfg.Size, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, format+"\n", args...) }

	raw, err := runRaw(ctx, url, cfg)
	if err != nil {
		return nil, fmt.Errorf("raw: %w", err)
	}
	res.RawTasksPerS, res.RawP50US, res.RawP99US, res.RawCPUUSPerReq = raw.perSecond, raw.p50, raw.p99, raw.cpuPerOp
	progress("raw:     %8.0f req/s  p50 %7.1f µs  p99 %7.1f µs  CPU %5.1f µs/req", raw.perSecond, raw.p50, raw.p99, raw.cpuPerOp)

	run := randHex(4)
	st, err := startStack(ctx, url, filepath.Join(dir, "stack"), run, cfg)
	if err != nil {
		return nil, fmt.Errorf("start orchestrator and agent: %w", err)
	}
	defer st.Stop()

	ch, err := runChiffon(ctx, st.Orchestrator(), cfg)
	if err != nil {
		return nil, fmt.Errorf("chiffon: %w", err)
	}
	res.ChiffonTasksPerS, res.ChiffonP50US, res.ChiffonP99US, res.ChiffonCPUUSPerTask = ch.perSecond, ch.p50, ch.p99, ch.cpuPerOp
	progress("chiffon: %8.0f task/s p50 %7.1f µs  p99 %7.1f µs  CPU %5.1f µs/task", ch.perSecond, ch.p50, ch.p99, ch.cpuPerOp)
	res.ThroughputRatio = ratio(res.ChiffonTasksPerS, res.RawTasksPerS)
	res.LatencyRatio = ratio(res.ChiffonP50US, res.RawP50US)
	if cfg.ThroughputOnly {
		return res, nil
	}
	if err := runRest(ctx, st, url, dir, run, cfg, res, progress); err != nil {
		return nil, err
	}
	return res, nil
}

// validate checks the store settings.
func (c Config) validate() error {
	if err := c.storeConfig("").Validate(); err != nil {
		return err
	}
	if c.Replicas > 1 && c.Store != orchestrator.StoreJetStream {
		return fmt.Errorf("--replicas %d: only the %s store has replicas", c.Replicas, orchestrator.StoreJetStream)
	}
	return nil
}

// runRest runs the phases after chiffon's on st: api, chunks, the store's
// replicas and memory.
func runRest(ctx context.Context, st *stack.Stack, url, dir, run string, cfg Config, res *Result,
	progress func(string, ...any)) error {
	api, err := runAPI(ctx, st, cfg)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	res.APITasksPerS, res.APIP50US = api.perSecond, api.p50
	progress("api:     %8.0f task/s p50 %7.1f µs", api.perSecond, api.p50)

	if res.ChunkMiBPerS, err = runChunks(ctx, st.Orchestrator(), cfg); err != nil {
		return fmt.Errorf("chunks: %w", err)
	}
	progress("chunks:  %8.1f MiB/s", res.ChunkMiBPerS)

	if cfg.Store == orchestrator.StoreJetStream {
		if res.Replicas, err = streamReplicas(ctx, url, cfg.storeConfig(run).JetStream.Stream); err != nil {
			return fmt.Errorf("task stream: %w", err)
		}
		progress("store:   a JetStream stream of %d replicas", res.Replicas)
	}

	res.PeakRSSMiB = peakRSSMiB()
	if cfg.Executable != "" {
		if res.IdleAgentRSSMiB, res.IdleOrchestratorRSSMiB, err = idleRSS(ctx, url, dir, cfg); err != nil {
			return fmt.Errorf("idle rss: %w", err)
		}
		progress("idle:    agent %.1f MiB, orchestrator %.1f MiB", res.IdleAgentRSSMiB, res.IdleOrchestratorRSSMiB)
	}
	progress("peak:    %.1f MiB", res.PeakRSSMiB)
	return nil
}

// stats are the figures of one phase.
type stats struct {
	perSecond float64
	p50, p99  float64 // µs
	cpuPerOp  float64 // µs of this process's CPU per operation of the rate run
}

// latencyAndRate measures latency over seqN runs of one, one at a time, and the rate
// over parN runs with k at once.
func latencyAndRate(ctx context.Context, seqN, parN, k int, one func(i int) error) (stats, error) {
	seq, err := measure(ctx, seqN, 1, one)
	if err != nil {
		return stats{}, err
	}
	par, err := measure(ctx, parN, k, one)
	if err != nil {
		return stats{}, err
	}
	return stats{perSecond: par.perSecond, p50: seq.p50, p99: seq.p99, cpuPerOp: par.cpuPerOp}, nil
}

// measure runs one(i) for i in [0, n) with k at once and returns the rate; when
// k == 1 it also returns the latency percentiles.
func measure(ctx context.Context, n, k int, one func(i int) error) (stats, error) {
	lat := make([]time.Duration, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	errc := make(chan error, k)
	cpu0, err := selfCPU()
	if err != nil {
		return stats{}, err
	}
	start := time.Now()
	for range k {
		go func() {
			for i := range next {
				if err := ctx.Err(); err != nil {
					errc <- err
					return
				}
				t0 := time.Now()
				if err := one(i); err != nil {
					errc <- err
					return
				}
				lat[i] = time.Since(t0)
			}
			errc <- nil
		}()
	}
	var first error
	for range k {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return stats{}, first
	}
	elapsed := time.Since(start)
	cpu, err := selfCPU()
	if err != nil {
		return stats{}, err
	}
	slices.Sort(lat)
	return stats{
		perSecond: float64(n) / elapsed.Seconds(),
		p50:       micros(lat[n*50/100]),
		p99:       micros(lat[min(n-1, n*99/100)]),
		cpuPerOp:  micros(cpu-cpu0) / float64(n),
	}, nil
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// randHex is n random bytes in hex, for subject prefixes of this run's own.
func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// connect dials url the way the daemons do.
func connect(url, name string) (*nats.Conn, error) {
	return broker.Connect(broker.ConnConfig{URLs: []string{url}, Name: name, Logger: slog.New(slog.DiscardHandler)})
}
