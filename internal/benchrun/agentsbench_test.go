package benchrun

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSpreadOf(t *testing.T) {
	for _, tc := range []struct {
		counts []int64
		want   Spread
	}{
		{nil, Spread{}},
		{[]int64{7}, Spread{7, 7, 7}},
		{[]int64{10, 10, 10}, Spread{10, 10, 10}},
		{[]int64{9, 1, 5}, Spread{1, 5, 9}},
		{[]int64{9, 1, 3, 6}, Spread{1, 4.5, 9}},
		{[]int64{0, 20, 10, 10}, Spread{0, 10, 20}},
	} {
		in := slices.Clone(tc.counts)
		if got := spreadOf(tc.counts); got != tc.want {
			t.Errorf("spreadOf(%v) = %+v, want %+v", tc.counts, got, tc.want)
		}
		if !slices.Equal(in, tc.counts) {
			t.Errorf("spreadOf reordered its input: %v", tc.counts)
		}
	}
}

func TestParseCPUTimeAddsUserAndSystemTicks(t *testing.T) {
	rest := " S 1 1 1 0 -1 4194304 96 0 0 0 %s 0 0 20 0 1 0 2757743 3133440 359"
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
		err        string
	}{
		{"plain", "29770 (chiffon)" + strings.Replace(rest, "%s", "250 130", 1), 3800 * time.Millisecond, ""},
		{"a name with spaces and parentheses", "12 (a) b (c)" + strings.Replace(rest, "%s", "1 2", 1), 30 * time.Millisecond, ""},
		{"no name", "12 chiffon S 1", 0, "no command name"},
		{"cut short", "12 (chiffon) S 1 1 1 0 -1 4194304 96 0 0 0 250", 0, "fields"},
		{"not a number", "12 (chiffon)" + strings.Replace(rest, "%s", "x 2", 1), 0, "utime or stime"},
	} {
		got, err := parseCPUTime(tc.stat)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want one with %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestProcessCPUGrowsWithWork reads this process's own /proc/<pid>/stat.
func TestProcessCPUGrowsWithWork(t *testing.T) {
	start, err := processCPU(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for x := 0; time.Now().Before(deadline); x++ {
		if now, err := processCPU(os.Getpid()); err != nil || now > start {
			return
		}
	}
	t.Fatal("10 s of a busy loop and the CPU time did not move")
}
