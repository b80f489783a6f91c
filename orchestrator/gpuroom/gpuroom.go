// Package gpuroom is how much GPU memory an orchestrator may still send a task
// to on each GPU of one agent: what the agent last reported, corrected by what
// the orchestrator sent it since. It is pure: the core calls it from its loop
// as dispatches, attempts' ends and heartbeats come, and routes by Fit.
//
// Each attempt dispatched with a need holds that much of one GPU of its agent,
// the one the agent puts it on (best fit: of the GPUs with room for it, the one
// left with the least; the first of equals), from its dispatch (Hold) to its
// end (Release). The room of a GPU is the smaller of
//   - its free_mb as last reported, less the holds that report does not show
//     yet, plus those it shows whose attempts have ended since. A hold shows
//     once a heartbeat lists its task as active (Reported): a heartbeat made
//     before the dispatch reached the agent frees nothing, and an ended task's
//     memory is free at once, until a heartbeat that no longer lists it says
//     so itself;
//   - its total_mb less the holds of attempts not ended: together they never
//     need more than the GPU has, even when a heartbeat came before a task
//     took its memory.
//
// The agent's own refusal (a 5005 for gpu_vram_mb) caps the room of every GPU
// at what it said it had (Refused) until its next report.
package gpuroom

import (
	"slices"

	"github.com/chiffon-dev/chiffon/envelope"
)

// Fit is how a task needing some GPU memory fits an agent.
type Fit int

const (
	// Never: no GPU of the agent is that large.
	Never Fit = iota
	// Later: one is, once its room frees.
	Later
	// Now: one has the room now.
	Now
)

// hold is an attempt's claim of need MiB on GPU index. shown: a report since
// the dispatch listed the task as active; ended: the attempt ended after that,
// and its memory is free again.
type hold struct {
	taskID       string
	index        int
	need         int64
	shown, ended bool
}

// Holds are the claims of the attempts sent to one agent on its GPUs. The zero
// value holds nothing.
type Holds struct {
	holds []hold
	// refused is set by the agent's refusal until its next report; most is
	// then the room it said it had.
	refused bool
	most    int64
}

// room is the room of g given holds (on any GPU): see the package's comment.
func room(g envelope.GPU, holds []hold) int64 {
	var unshown, freed, live int64
	for _, h := range holds {
		switch {
		case h.index != g.Index:
		case h.ended:
			freed += h.need
		case !h.shown:
			unshown += h.need
			live += h.need
		default:
			live += h.need
		}
	}
	return min(g.FreeMB-unshown+freed, g.TotalMB-live)
}

// Fit is where a task needing need MiB fits on gpus, the agent's GPUs as last
// reported: the index of the GPU with the most room (the first of equals), that
// room, and whether the task fits there now, later or never.
func (h *Holds) Fit(gpus []envelope.GPU, need int64) (index int, most int64, fit Fit) {
	for i, g := range gpus {
		r := room(g, h.holds)
		if h.refused {
			r = min(r, h.most)
		}
		if i == 0 || r > most {
			index, most = g.Index, r
		}
		if g.TotalMB >= need {
			fit = Later
		}
	}
	if fit == Later && most >= need {
		fit = Now
	}
	return index, most, fit
}

// Hold charges an attempt of taskID, needing need MiB, to the GPU of gpus the
// agent puts it on (place); nothing without GPUs. It replaces what an earlier
// attempt of the task held: that memory is not free while this one may be the
// same run.
func (h *Holds) Hold(taskID string, gpus []envelope.GPU, need int64) {
	if need <= 0 || len(gpus) == 0 {
		return
	}
	h.holds = slices.DeleteFunc(h.holds, func(x hold) bool { return x.taskID == taskID })
	h.holds = append(h.holds, hold{taskID: taskID, index: h.place(gpus, need), need: need})
}

// place is the index of the GPU an agent puts a task needing need MiB on, as
// the agent chooses it (agent/gpu_pool.go): of those with room for it, the one
// left with the least, the first of equals; with room on none, the one with
// the most room.
func (h *Holds) place(gpus []envelope.GPU, need int64) int {
	best, left := -1, int64(0)
	for _, g := range gpus {
		if r := room(g, h.holds); r >= need && (best < 0 || r-need < left) {
			best, left = g.Index, r-need
		}
	}
	if best < 0 {
		best, _, _ = h.Fit(gpus, need)
	}
	return best
}

// Release ends the hold of taskID's attempt: its memory is free again.
func (h *Holds) Release(taskID string) {
	for i, x := range h.holds {
		h.holds[i].ended = x.ended || x.taskID == taskID
	}
	// What no report showed was never counted in one.
	h.holds = slices.DeleteFunc(h.holds, func(x hold) bool { return x.ended && !x.shown })
}

// Refused takes the agent's refusal of a task for GPU memory: no GPU has more
// room than most until its next report.
func (h *Holds) Refused(most int64) { h.refused, h.most = true, most }

// Reported takes the agent's new report of its GPUs (a heartbeat listing its
// active tasks, or a registration listing none): the holds of the tasks it
// lists show in its free memory, those of ended attempts it does not list are
// free in it, and a refusal's cap ends.
func (h *Holds) Reported(active []string) {
	h.refused = false
	h.holds = slices.DeleteFunc(h.holds, func(x hold) bool { return x.ended && !slices.Contains(active, x.taskID) })
	for i, x := range h.holds {
		h.holds[i].shown = x.shown || slices.Contains(active, x.taskID)
	}
}
