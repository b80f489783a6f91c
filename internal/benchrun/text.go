package benchrun

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteText writes the scale curve as a table, a point that failed with its
// error.
func (res *ScaleResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%d tasks, %d in flight, %d CPUs; each point a fresh process\n", res.Tasks, res.InFlight, res.NumCPU)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PROCS\tCHIFFON TASKS/S\tRAW TASKS/S\tRATIO\tCHIFFON P50 µS\tCPU µS/TASK\tCORES BUSY\t")
	for _, p := range res.Scale {
		if p.Error != "" {
			fmt.Fprintf(tw, "%d\t\t\t\t\t\t\t  error: %s\n", p.Procs, p.Error)
			continue
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.2f\t%.1f\t%.1f\t%.2f\t\n", p.Procs, p.ChiffonTasksPerS, p.RawTasksPerS,
			p.ThroughputRatio, p.ChiffonP50US, p.ChiffonCPUUSPerTask, p.CoresBusy())
	}
	_ = tw.Flush()
}

// WriteText writes the figures of `chiffon bench --agents`.
func (r *AgentsResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%d agents, heartbeat %gs; all online %.2f s after they started\n", r.Agents, r.HeartbeatS, r.RegisterS)
	id := r.Idle
	fmt.Fprintf(w, "idle:    orchestrator %.2f%% of one core over %.0f s, RSS %.1f MiB (this process, the agents and the broker: %.1f%%, %.0f MiB); longest tick gap %.0f ms\n",
		id.OrchestratorCPUPct, id.WindowS, id.OrchestratorRSSMiB, id.BenchCPUPct, id.BenchRSSMiB, id.LongestTickGapMS)
	rs := r.Restart
	fmt.Fprintf(w, "restart: broker down %.0f ms; all %d registered again %.2f s after it was back, %d online; breakers opened: %d\n",
		rs.BrokerDownMS, rs.Reregistered, rs.ReregisterS, rs.Online, rs.BreakersOpened)
	s := r.Spread
	fmt.Fprintf(w, "spread:  %d no-op tasks at %.0f/s; tasks per agent: min %d, median %g, max %d\n",
		s.Tasks, s.TasksPerS, s.Min, s.Median, s.Max)
	fmt.Fprintf(w, "whole run: %d breakers opened, %d agents went offline\n", r.BreakersOpened, r.AgentsWentOffline)
}
