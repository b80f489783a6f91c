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
			"throughput_ratio": p.ThroughputRatio, "chiffon_p50_us": p.ChiffonP50US} {
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

func TestBenchPrintsTheCurveAndTheAgentsFigures(t *testing.T) {
	var b bytes.Buffer
	printScale(&b, &benchrun.ScaleResult{NumCPU: 4, Tasks: 50, InFlight: 4, Scale: []benchrun.ScalePoint{
		{Procs: 1, ChiffonTasksPerS: 5123, RawTasksPerS: 40000, ThroughputRatio: 0.128, ChiffonP50US: 150.25},
		{Procs: 2, Error: "exit status 3: the broker would not start"},
	}})
	for _, want := range []string{"PROCS", "CHIFFON TASKS/S", "RAW TASKS/S", "RATIO", "CHIFFON P50 µS",
		"5123", "40000", "0.13", "150.2", "error: exit status 3: the broker would not start"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the curve has no %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	r := &benchrun.AgentsResult{Agents: 100, HeartbeatS: 5, RegisterS: 1.5,
		Idle:           benchrun.IdleFigures{WindowS: 50, OrchestratorCPUPct: 1.25, BenchCPUPct: 3.5, OrchestratorRSSMiB: 40.5, BenchRSSMiB: 312, LongestTickGapMS: 104},
		Restart:        benchrun.RestartFigures{BrokerDownMS: 3, ReregisterS: 0.75, Reregistered: 100, Online: 100, BreakersOpened: 2},
		Spread:         benchrun.SpreadFigures{Tasks: 1000, TasksPerS: 900, Spread: benchrun.Spread{Min: 8, Median: 10, Max: 12}},
		BreakersOpened: 2, AgentsWentOffline: 1}
	printAgents(&b, r)
	for _, want := range []string{"100 agents", "1.25% of one core over 50 s", "40.5 MiB", "3.5%, 312 MiB", "tick gap 104 ms", "down 3 ms",
		"all 100 registered again 0.75 s", "breakers opened: 2", "1000 no-op tasks at 900/s", "min 8, median 10, max 12",
		"1 agents went offline"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the summary has no %q:\n%s", want, b.String())
		}
	}
}
