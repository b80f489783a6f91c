package benchrun

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// No test may leave a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestScaleProcsDoublesUpToTheCPUsAndEndsOnThem(t *testing.T) {
	for _, tc := range []struct {
		cpus int
		want []int
	}{
		{1, []int{1}},
		{2, []int{1, 2}},
		{3, []int{1, 2, 3}},
		{5, []int{1, 2, 4, 5}},
		{16, []int{1, 2, 4, 8, 16}},
		{0, []int{1}},
	} {
		if got := ScaleProcs(tc.cpus); !slices.Equal(got, tc.want) {
			t.Errorf("ScaleProcs(%d) = %v, want %v", tc.cpus, got, tc.want)
		}
	}
}

// fakePoint is a `chiffon bench` for RunScale: it refuses to run without the
// point's flag and settings, fails at GOMAXPROCS 1, says it ran at 3 when asked
// for 4, and gives figures otherwise.
const fakePoint = `#!/bin/sh
[ "$1 $2 $3" = "bench --scale-point --json" ] || { echo "args: $*" >&2; exit 2; }
case " $* " in *" --tasks 50 --inflight 4 "*) ;; *) echo "settings: $*" >&2; exit 2;; esac
case "$GOMAXPROCS" in
1) echo "first line" >&2; echo "the broker would not start" >&2; exit 3;;
4) echo '{"gomaxprocs": 3}';;
*) echo "{\"gomaxprocs\": $GOMAXPROCS, \"chiffon_tasks_per_s\": 100, \"raw_tasks_per_s\": 400, \"throughput_ratio\": 0.25, \"chiffon_p50_us\": 50, \"chiffon_cpu_us_per_task\": 120}";;
esac
`

func TestRunScaleKeepsGoingPastAFailedPoint(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "chiffon")
	if err := os.WriteFile(exe, []byte(fakePoint), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := RunScale(context.Background(), Config{Executable: exe, Tasks: 50, InFlight: 4}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Scale) != 3 {
		t.Fatalf("points %+v, want GOMAXPROCS 1, 2 and 4", res.Scale)
	}
	if p := res.Scale[0]; p.Procs != 1 || !strings.Contains(p.Error, "exit status 3") ||
		!strings.Contains(p.Error, "the broker would not start") || p.ChiffonTasksPerS != 0 {
		t.Errorf("the failed point: %+v", p)
	}
	want := ScalePoint{Procs: 2, ChiffonTasksPerS: 100, RawTasksPerS: 400, ThroughputRatio: 0.25, ChiffonP50US: 50,
		ChiffonCPUUSPerTask: 120}
	if p := res.Scale[1]; p != want {
		t.Errorf("the point after it: %+v, want %+v", p, want)
	}
	if p := res.Scale[2]; p.Procs != 4 || !strings.Contains(p.Error, "GOMAXPROCS 3, not 4") {
		t.Errorf("the point that ran at the wrong GOMAXPROCS: %+v", p)
	}
}
