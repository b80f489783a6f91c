package main

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/internal/benchrun"
	"go.uber.org/goleak"
)

// TestBenchScaleRunsEachPointInAProcessOfItsOwn runs the curve at GOMAXPROCS 1
// and 2, each point a subprocess (this test binary as chiffon), and checks that
// each has its figures. It never asserts speed.
func TestBenchScaleRunsEachPointInAProcessOfItsOwn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a subprocess per point, each with NATS, an orchestrator and an agent")
	}
	t.Setenv(benchAsCLIEnv, "1")
	var out, errb bytes.Buffer
	args := []string{"bench", "--scale", "--max-procs", "2", "--tasks", "50", "--inflight", "4", "--json"}
	if code := run(context.Background(), args, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res benchrun.ScaleResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output is not the curve: %v\n%s", err, out.String())
	}
	if res.NumCPU != runtime.NumCPU() || res.Tasks != 50 || res.InFlight != 4 || len(res.Scale) != 2 {
		t.Fatalf("curve %+v, want 2 points of 50 tasks, 4 in flight", res)
	}
	for i, p := range res.Scale {
		if p.Procs != i+1 || p.Error != "" {
			t.Errorf("point %d: %+v, want GOMAXPROCS %d without error", i, p, i+1)
		}
		for name, v := range map[string]float64{"chiffon_tasks_per_s": p.ChiffonTasksPerS, "raw_tasks_per_s": p.RawTasksPerS,
			"throughput_ratio": p.ThroughputRatio, "chiffon_p50_us": p.ChiffonP50US, "chiffon_cpu_us_per_task": p.ChiffonCPUUSPerTask} {
			if v <= 0 || v > 1e9 {
				t.Errorf("procs %d: %s = %v, want a positive figure", p.Procs, name, v)
			}
		}
	}
}

// TestBenchAgentsReportsEveryFigure runs five light agents with a short heartbeat
// against an orchestrator subprocess, and checks the figures of each phase. It
// never asserts speed; it does check that the agents stop with the run.
func TestBenchAgentsReportsEveryFigure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS, an orchestrator subprocess and five agents")
	}
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })
	t.Setenv(benchAsCLIEnv, "1")
	var out, errb bytes.Buffer
	args := []string{"bench", "--agents", "5", "--heartbeat", "250ms", "--inflight", "8", "--json"}
	if code := run(context.Background(), args, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res benchrun.AgentsResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output is not the figures: %v\n%s", err, out.String())
	}
	if res.Agents != 5 || res.HeartbeatS != 0.25 || res.RegisterS <= 0 {
		t.Errorf("agents %d, heartbeat %v s, online after %v s; want 5, 0.25 and a time", res.Agents, res.HeartbeatS, res.RegisterS)
	}
	idle := res.Idle
	if idle.WindowS < 2.5 || idle.OrchestratorCPUPct < 0 || idle.OrchestratorCPUPct > 100*float64(runtime.NumCPU()) ||
		idle.BenchCPUPct <= 0 || idle.OrchestratorRSSMiB <= 0 || idle.BenchRSSMiB <= 0 || idle.LongestTickGapMS < 100 {
		t.Errorf("idle figures %+v: want a window of 10 heartbeats, CPU shares, RSS and a tick gap", idle)
	}
	rs := res.Restart
	if rs.BrokerDownMS <= 0 || rs.ReregisterS < 0 || rs.Reregistered != 5 || rs.Online != 5 || rs.BreakersNotClosed != 0 {
		t.Errorf("restart figures %+v: want all 5 registered again and online, breakers closed", rs)
	}
	sp := res.Spread
	if sp.Tasks != 50 || sp.TasksPerS <= 0 || sp.Max < 10 || sp.Min > 10 || float64(sp.Min) > sp.Median || sp.Median > float64(sp.Max) {
		t.Errorf("spread %+v: want 50 tasks, 10 an agent on average", sp)
	}

	// Its own broker, restarted: a server of the caller's cannot be.
	errb.Reset()
	code := run(context.Background(), []string{"bench", "--agents", "5", "--nats", "nats://127.0.0.1:4222"}, nil, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "--nats") {
		t.Errorf("--agents with --nats: exit %d, %s; want a usage error", code, errb.String())
	}
}
