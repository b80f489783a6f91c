package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/internal/benchrun"
	"github.com/spf13/cobra"
)

// benchFlags are `chiffon bench`'s flags beyond benchrun.Config's.
type benchFlags struct {
	asJSON     bool
	cpuProfile string
	// trace and mutexProfile show what waits on what.
	trace        string
	mutexProfile string
	noIdle       bool
	// scale runs the scale curve up to maxProcs; scalePoint one of its points.
	scale      bool
	maxProcs   int
	scalePoint bool
	// agents, when over 0, runs the agents mode with heartbeat.
	agents    int
	heartbeat time.Duration
}

// newBenchCmd is `chiffon bench`; the phases are in internal/benchrun.
func newBenchCmd() *cobra.Command {
	var (
		cfg benchrun.Config
		f   benchFlags
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure Chiffon against raw NATS request/reply on the same server",
		Long: `Measure, in one run and on one NATS server (embedded unless --nats is given):
  raw      NATS request/reply with 3 status messages per request, one at a time
           (latency) and --inflight at once (throughput);
  chiffon  no-op tasks end to end through an orchestrator and an agent in this
           process, with real Badger stores in a temporary directory (with
           --store jetstream the orchestrator's tasks are in a JetStream stream,
           and with --replicas 3 in 3 replicas on an embedded 3-node cluster);
  api      the same through POST /api/v1/tasks and the task's event stream;
  chunks   one task writing 10 MiB of output, sent as chunks and reassembled;
  memory   this process's peak RSS, and the RSS of an idle chiffon agent and
           orchestrator started as subprocesses.

With --scale, only raw and chiffon, at GOMAXPROCS 1, 2, 4, ... up to --max-procs
(the machine's CPUs), each point in a fresh subprocess with the other flags.

With --agents N, N agents in this process (in-memory dedupe caches, a NATS
connection each) against an orchestrator subprocess, on an embedded broker: the
orchestrator's CPU while they only heartbeat (over 10 heartbeats), the time until
all have registered again after the broker restarts, and how 10 no-op tasks per
agent, through the API, spread over them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stop, err := startProfiles(f)
			if err != nil {
				return err
			}
			err = runBench(cmd, cfg, f)
			if perr := stop(); err == nil {
				err = perr
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.NATSURL, "nats", "", "NATS URL; default: an embedded server on 127.0.0.1")
	fl.IntVar(&cfg.Tasks, "tasks", 2000, "tasks (and raw requests) per phase")
	fl.IntVar(&cfg.InFlight, "inflight", 64, "tasks in flight in the throughput runs (and --agents' spread)")
	fl.IntVar(&cfg.Size, "size", 256, "payload bytes of each request")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON object with every figure")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fl.StringVar(&f.trace, "trace", "", "write an execution trace of the whole run to this file (go tool trace)")
	fl.StringVar(&f.mutexProfile, "mutexprofile", "", "write a profile of contended mutexes to this file at the end")
	fl.BoolVar(&f.noIdle, "no-idle", false, "skip the idle agent and orchestrator RSS figures")
	fl.StringVar(&cfg.Store, "store", "badger", "the orchestrator's task store: badger or jetstream (the embedded server then runs JetStream)")
	fl.IntVar(&cfg.Replicas, "replicas", 1, "replicas of the jetstream store's stream: 1, 3 or 5; over 1 the embedded broker is a cluster of as many nodes in this process")
	fl.BoolVar(&f.scale, "scale", false, "run raw and chiffon at GOMAXPROCS 1, 2, 4, ... up to --max-procs, each in a subprocess, and print the curve")
	fl.IntVar(&f.maxProcs, "max-procs", 0, "the last GOMAXPROCS of --scale; 0 means the machine's CPUs")
	fl.BoolVar(&f.scalePoint, benchrun.ScalePointFlag, false, "run one point of --scale: raw and chiffon only, as JSON")
	_ = fl.MarkHidden(benchrun.ScalePointFlag)
	fl.IntVar(&f.agents, "agents", 0, "run N light agents against an orchestrator subprocess: its idle CPU, re-registration after a broker restart, dispatch spread")
	fl.DurationVar(&f.heartbeat, "heartbeat", agent.DefaultHeartbeatInterval, "the heartbeat interval of --agents' agents")
	return cmd
}

// runBench runs the mode f names.
func runBench(cmd *cobra.Command, cfg benchrun.Config, f benchFlags) error {
	if f.scale && f.agents > 0 {
		return usagef("--scale and --agents are separate runs: give one")
	}
	if f.agents > 0 && (cfg.NATSURL != "" || cmd.Flags().Changed("store") || cmd.Flags().Changed("replicas")) {
		return usagef("--agents runs its own broker (it restarts it) and the Badger store: --nats, --store and --replicas do not apply")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if !f.asJSON {
		cfg.Progress = cmd.ErrOrStderr()
	}
	switch {
	case f.scale:
		cfg.Executable = exe
		res, err := benchrun.RunScale(cmd.Context(), cfg, f.maxProcs)
		if err != nil {
			return err
		}
		return printResult(out, f.asJSON, res, func() { res.WriteText(out) })
	case f.agents > 0:
		res, err := benchrun.RunAgents(cmd.Context(), benchrun.AgentsConfig{Agents: f.agents, Heartbeat: f.heartbeat,
			InFlight: cfg.InFlight, Executable: exe, Progress: cfg.Progress})
		if err != nil {
			return err
		}
		return printResult(out, f.asJSON, res, func() { res.WriteText(out) })
	}
	cfg.ThroughputOnly = f.scalePoint
	if f.scalePoint {
		f.asJSON, cfg.Progress = true, nil
	}
	if !f.noIdle && !f.scalePoint {
		cfg.Executable = exe
	}
	res, err := benchrun.Run(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	return printResult(out, f.asJSON, res, func() {
		fmt.Fprintf(out, "throughput_ratio %.2f (chiffon %.0f / raw %.0f tasks/s, %d in flight)\n",
			res.ThroughputRatio, res.ChiffonTasksPerS, res.RawTasksPerS, res.InFlight)
		fmt.Fprintf(out, "latency_ratio    %.2f (chiffon p50 %.0f µs / raw p50 %.0f µs)\n",
			res.LatencyRatio, res.ChiffonP50US, res.RawP50US)
	})
}

// printResult writes res as one JSON object, or calls text.
func printResult(out io.Writer, asJSON bool, res any, text func()) error {
	if asJSON {
		return json.NewEncoder(out).Encode(res)
	}
	text()
	return nil
}
