package benchrun

import (
	"bytes"
	"strings"
	"testing"
)

// TestTheTextHasEveryFigure: the curve and the agents' summary, as
// `chiffon bench` prints them, hold every figure.
func TestTheTextHasEveryFigure(t *testing.T) {
	var b bytes.Buffer
	(&ScaleResult{NumCPU: 4, Tasks: 50, InFlight: 4, Scale: []ScalePoint{
		{Procs: 1, ChiffonTasksPerS: 5000, RawTasksPerS: 40000, ThroughputRatio: 0.125, ChiffonP50US: 150.25, ChiffonCPUUSPerTask: 190.5},
		{Procs: 2, Error: "exit status 3: the broker would not start"},
	}}).WriteText(&b)
	for _, want := range []string{"PROCS", "CHIFFON TASKS/S", "RAW TASKS/S", "RATIO", "CHIFFON P50 µS", "CPU µS/TASK", "CORES BUSY",
		"5000", "40000", "0.12", "150.2", "190.5", "0.95", "error: exit status 3: the broker would not start"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the curve has no %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	r := &AgentsResult{Agents: 100, HeartbeatS: 5, RegisterS: 1.5,
		Idle:           IdleFigures{WindowS: 50, OrchestratorCPUPct: 1.25, BenchCPUPct: 3.5, OrchestratorRSSMiB: 40.5, BenchRSSMiB: 312, LongestTickGapMS: 104},
		Restart:        RestartFigures{BrokerDownMS: 3, ReregisterS: 0.75, Reregistered: 100, Online: 100, BreakersOpened: 2},
		Spread:         SpreadFigures{Tasks: 1000, TasksPerS: 900, Spread: Spread{Min: 8, Median: 10, Max: 12}},
		BreakersOpened: 2, AgentsWentOffline: 1}
	r.WriteText(&b)
	for _, want := range []string{"100 agents", "1.25% of one core over 50 s", "40.5 MiB", "3.5%, 312 MiB", "tick gap 104 ms", "down 3 ms",
		"all 100 registered again 0.75 s", "breakers opened: 2", "1000 no-op tasks at 900/s", "min 8, median 10, max 12",
		"1 agents went offline"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the summary has no %q:\n%s", want, b.String())
		}
	}
}
