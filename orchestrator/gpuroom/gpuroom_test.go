package gpuroom

import (
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
)

// gpu0 is GPU 0 with total and free MiB.
func gpu0(total, free int64) envelope.GPU {
	return envelope.GPU{Index: 0, Name: "NVIDIA H100", TotalMB: total, FreeMB: free}
}

func TestRoomIsReportedFreeLessWhatItDoesNotShowBoundedByTotal(t *testing.T) {
	cases := []struct {
		name        string
		total, free int64
		holds       []hold
		want        int64
	}{
		{"nothing held: what it reported", 80, 70, nil, 70},
		{"a dispatch since the report", 80, 70, []hold{{index: 0, need: 30}}, 40},
		{"two dispatches since the report", 80, 70, []hold{{index: 0, need: 30}, {index: 0, need: 30}}, 10},
		{"a task the report shows is not counted twice", 80, 50, []hold{{index: 0, need: 30, shown: true}}, 50},
		{"a report made before the task took its memory: total bounds", 80, 80, []hold{{index: 0, need: 60, shown: true}}, 20},
		{"shown and unshown together", 80, 50, []hold{{index: 0, need: 30, shown: true}, {index: 0, need: 20}}, 30},
		{"holds on another GPU do not count", 80, 70, []hold{{index: 1, need: 60}}, 70},
		{"over-committed: below zero", 80, 10, []hold{{index: 0, need: 30}}, -20},
		{"an ended task the report shows gives its memory back", 80, 20, []hold{{index: 0, need: 50, shown: true, ended: true}}, 70},
		{"given back, bounded by total", 80, 60, []hold{{index: 0, need: 50, shown: true, ended: true}, {index: 0, need: 40, shown: true}}, 40},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := room(gpu0(tc.total, tc.free), tc.holds); got != tc.want {
				t.Fatalf("room %d, want %d", got, tc.want)
			}
		})
	}
}

func TestFitIsTheGPUWithTheMostRoom(t *testing.T) {
	two := []envelope.GPU{{Index: 0, TotalMB: 40, FreeMB: 30}, {Index: 1, TotalMB: 80, FreeMB: 50}}
	cases := []struct {
		name      string
		gpus      []envelope.GPU
		h         Holds
		need      int64
		wantIndex int
		wantRoom  int64
		wantFit   Fit
	}{
		{"no GPU: never", nil, Holds{}, 1, 0, 0, Never},
		{"the one with more room", two, Holds{}, 20, 1, 50, Now},
		{"a hold moves the choice", two, Holds{holds: []hold{{index: 1, need: 40}}}, 20, 0, 30, Now},
		{"too little room now, large enough later", two, Holds{}, 60, 1, 50, Later},
		{"larger than any GPU: never", two, Holds{}, 81, 1, 50, Never},
		{"exactly the room fits", two, Holds{}, 50, 1, 50, Now},
		{"the agent's refusal caps the room", two, Holds{refused: true, most: 10}, 20, 0, 10, Later},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i, room, fit := tc.h.Fit(tc.gpus, tc.need)
			if i != tc.wantIndex || room != tc.wantRoom || fit != tc.wantFit {
				t.Fatalf("GPU %d, room %d, fit %d; want GPU %d, room %d, fit %d", i, room, fit, tc.wantIndex, tc.wantRoom, tc.wantFit)
			}
		})
	}
}

// TestHoldsFollowDispatchesEndsAndReports: two tasks in a row do not share room
// for one; a report frees a hold only once it lists its task; an ended task's
// memory is free at once; a refusal caps the room until the next report.
func TestHoldsFollowDispatchesEndsAndReports(t *testing.T) {
	type step struct {
		name string
		do   func(h *Holds)
		free int64 // the GPU's free_mb as last reported
		want int64 // the room then
	}
	const total = 10000
	steps := []step{
		{"nothing sent", func(*Holds) {}, 6000, 6000},
		{"t1 sent", func(h *Holds) { h.Hold("t1", []envelope.GPU{gpu0(total, 6000)}, 4000) }, 6000, 2000},
		{"a report made before t1 reached the agent", func(h *Holds) { h.Reported(nil) }, 6000, 2000},
		{"a report listing t1, its memory taken", func(h *Holds) { h.Reported([]string{"t1"}) }, 2000, 2000},
		{"t1 sent again (a retry): held once", func(h *Holds) { h.Hold("t1", []envelope.GPU{gpu0(total, 2000)}, 4000) }, 2000, -2000},
		{"a report listing t1 again", func(h *Holds) { h.Reported([]string{"t1"}) }, 2000, 2000},
		{"t1 ended: its memory is free at once", func(h *Holds) { h.Release("t1") }, 2000, 6000},
		{"a report made before t1 ended does not undo that", func(h *Holds) { h.Reported([]string{"t1"}) }, 2000, 6000},
		{"a report without t1 says it itself", func(h *Holds) { h.Reported(nil) }, 6000, 6000},
		{"t2 refused by the agent, which says 1000 MiB", func(h *Holds) {
			h.Hold("t2", []envelope.GPU{gpu0(total, 6000)}, 4000)
			h.Release("t2")
			h.Refused(1000)
		}, 6000, 1000},
		{"its next report ends the cap", func(h *Holds) { h.Reported(nil) }, 6000, 6000},
	}
	var h Holds
	for _, s := range steps {
		s.do(&h)
		if _, room, _ := h.Fit([]envelope.GPU{gpu0(total, s.free)}, 1); room != s.want {
			t.Fatalf("%s: room %d, want %d (holds %+v)", s.name, room, s.want, h.holds)
		}
	}
	if len(h.holds) != 0 {
		t.Fatalf("holds left: %+v", h.holds)
	}
}

// TestHoldGoesWhereTheAgentPutsTheTask: a hold lands on the GPU the agent
// picks, the best fit, so that a larger task after it still finds the larger
// GPU's room: with the hold on the GPU of most room, it would wait.
func TestHoldGoesWhereTheAgentPutsTheTask(t *testing.T) {
	two := []envelope.GPU{{Index: 0, TotalMB: 40, FreeMB: 30}, {Index: 1, TotalMB: 80, FreeMB: 50}}
	var h Holds
	h.Hold("small", two, 20)
	if len(h.holds) != 1 || h.holds[0].index != 0 {
		t.Fatalf("the 20 MiB task held %+v, want GPU 0 (30 free: the best fit)", h.holds)
	}
	if _, room, fit := h.Fit(two, 40); fit != Now || room != 50 {
		t.Fatalf("a 40 MiB task after it: room %d, fit %d; want GPU 1's 50, now", room, fit)
	}
	h.Hold("big", two, 70) // room on none: the GPU of most room
	if h.holds[1].index != 1 {
		t.Fatalf("a task no GPU has room for held %+v, want GPU 1", h.holds[1])
	}
}
