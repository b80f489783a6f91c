package taskview

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
)

// testBatch is a batch of three agents: a and b in states a and b, c offline.
func testBatch(state api.BatchState, a, b string, final bool) *api.Batch {
	created := time.Date(2026, 1, 19, 4, 21, 4, 0, time.UTC)
	bt := &api.Batch{ID: "5f0c6d4e-8a1b-4c2d-9e3f-0a1b2c3d4e5f", State: state,
		BatchRequest: api.BatchRequest{ToAgent: "infra", WorkType: "patch", Agents: []string{"a", "b", "c"}},
		Targets: []api.BatchTarget{
			{AgentID: "a", TaskID: "01a21b10-0000-7000-8000-00000000000a", State: a},
			{AgentID: "b", TaskID: "01a21b10-0000-7000-8000-00000000000b", State: b},
			{AgentID: "c", State: api.TargetOffline},
		},
		CreatedAt: created,
	}
	bt.Counts = map[string]int{}
	for i := range bt.Targets {
		t := &bt.Targets[i]
		if t.State == "succeeded" {
			t.ProgressPercent = 100
		}
		bt.Counts[t.State]++
	}
	if final {
		end := created.Add(90 * time.Second)
		bt.FinishedAt = &end
	}
	return bt
}

// On a terminal each agent keeps one line, redrawn in place.
func TestBatchLiveViewRedrawsInPlace(t *testing.T) {
	var buf bytes.Buffer
	v := &batchLiveView{w: &buf, columns: func() int { return 80 }}
	v.Batch(testBatch(api.BatchRunning, "running", "waiting", false))
	first := buf.String()
	if regexp.MustCompile(`\x1b\[\d+F`).MatchString(first) {
		t.Fatalf("first frame moves up: %q", first)
	}
	if n := strings.Count(first, "\n"); n != 4 {
		t.Fatalf("first frame has %d lines, want 4 (the batch, 3 agents): %q", n, first)
	}
	buf.Reset()
	v.Batch(testBatch(api.BatchRunning, "running", "waiting", false))
	if buf.Len() != 0 {
		t.Errorf("an unchanged batch redrawn: %q", buf.String())
	}
	v.Batch(testBatch(api.BatchRunning, "succeeded", "running", false))
	second := buf.String()
	if !strings.HasPrefix(second, "\033[4F") || strings.Count(second, "\n") != 4 || !strings.Contains(second, "b  running") {
		t.Errorf("second frame does not redraw the 4 lines in place: %q", second)
	}

	// More agents than rows: the last ones are summed up in one line.
	buf.Reset()
	v = &batchLiveView{w: &buf, columns: func() int { return 80 }, rows: func() int { return 4 }}
	v.Batch(testBatch(api.BatchRunning, "running", "waiting", false))
	if got := buf.String(); strings.Count(got, "\n") != 3 || !strings.Contains(got, "… 2 more: 1 waiting, 1 offline") {
		t.Errorf("frame on 4 rows: %q", got)
	}
}
