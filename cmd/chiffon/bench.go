package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/chiffon-dev/chiffon/internal/benchrun"
	"github.com/spf13/cobra"
)

// newBenchCmd is `chiffon bench`; the phases are in internal/benchrun.
func newBenchCmd() *cobra.Command {
	var (
		cfg        benchrun.Config
		asJSON     bool
		cpuProfile string
		noIdle     bool
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
           orchestrator started as subprocesses.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			if !noIdle {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				cfg.Executable = exe
			}
			if !asJSON {
				cfg.Progress = cmd.ErrOrStderr()
			}
			res, err := benchrun.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				return enc.Encode(res)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "throughput_ratio %.2f (chiffon %.0f / raw %.0f tasks/s, %d in flight)\n",
				res.ThroughputRatio, res.ChiffonTasksPerS, res.RawTasksPerS, res.InFlight)
			fmt.Fprintf(out, "latency_ratio    %.2f (chiffon p50 %.0f µs / raw p50 %.0f µs)\n",
				res.LatencyRatio, res.ChiffonP50US, res.RawP50US)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.NATSURL, "nats", "", "NATS URL; default: an embedded server on 127.0.0.1")
	fl.IntVar(&cfg.Tasks, "tasks", 2000, "tasks (and raw requests) per phase")
	fl.IntVar(&cfg.InFlight, "inflight", 64, "tasks in flight in the throughput runs")
	fl.IntVar(&cfg.Size, "size", 256, "payload bytes of each request")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object with every figure")
	fl.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fl.BoolVar(&noIdle, "no-idle", false, "skip the idle agent and orchestrator RSS figures")
	fl.StringVar(&cfg.Store, "store", "badger", "the orchestrator's task store: badger or jetstream (the embedded server then runs JetStream)")
	fl.IntVar(&cfg.Replicas, "replicas", 1, "replicas of the jetstream store's stream: 1, 3 or 5; over 1 the embedded broker is a cluster of as many nodes in this process")
	return cmd
}
