package watch

import (
	"testing"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// drain reads what w holds without waiting: the events, and whether it is
// closed.
func drain(w *Watcher) (got int, closed bool) {
	for {
		select {
		case _, ok := <-w.Events():
			if !ok {
				return got, true
			}
			got++
		default:
			return got, false
		}
	}
}

// TestHubStreams: each call's effect on a task's streams (an SSE stream with
// room for two events, a Wait) and on another task's stream.
func TestHubStreams(t *testing.T) {
	ended := &task.Task{ID: "a", State: task.StateSucceeded}
	step := &task.Event{Seq: 1, Type: task.EventStatus}
	cases := []struct {
		name string
		do   func(h *Hub)
		// sse: events got, closed; wait: closed, with a final task; other:
		// the other task's stream closed; tasks: those left with a stream.
		sseGot                    int
		sseClosed, waitEnd, final bool
		otherClosed               bool
		tasks                     int
	}{
		{"steps reach the stream, not the wait", func(h *Hub) { h.Step("a", step); h.Step("a", step) },
			2, false, false, false, false, 2},
		{"a stream that falls behind is ended", func(h *Hub) { h.Step("a", step); h.Step("a", step); h.Step("a", step) },
			2, true, false, false, false, 2},
		{"the end closes the task's streams with it", func(h *Hub) { h.End("a", ended) },
			0, true, true, true, false, 1},
		{"a drop closes them without", func(h *Hub) { h.End("a", nil) },
			0, true, true, false, false, 1},
		{"EndAll closes every stream", func(h *Hub) { h.EndAll() },
			0, true, true, false, true, 0},
		{"another task's end closes nothing here", func(h *Hub) { h.End("b", ended) },
			0, false, false, false, true, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h Hub
			sse, wait, other := h.Add("a", 2), h.Add("a", 0), h.Add("b", 1)
			tc.do(&h)
			if got, closed := drain(sse); got != tc.sseGot || closed != tc.sseClosed {
				t.Errorf("stream: %d events, closed %v; want %d, %v", got, closed, tc.sseGot, tc.sseClosed)
			}
			if _, closed := drain(wait); closed != tc.waitEnd || (wait.Final() != nil) != tc.final {
				t.Errorf("wait: closed %v with %v; want %v, a task %v", closed, wait.Final(), tc.waitEnd, tc.final)
			}
			if tc.final && (sse.Final() != wait.Final() || wait.Final() == ended) {
				t.Error("the final task is not one clone shared by the streams")
			}
			if _, closed := drain(other); closed != tc.otherClosed {
				t.Errorf("other task's stream closed %v, want %v", closed, tc.otherClosed)
			}
			if n := h.Tasks(); n != tc.tasks {
				t.Errorf("%d tasks with streams, want %d", n, tc.tasks)
			}
			sse.Stop()
			wait.Stop()
			other.Stop()
			sse.Stop() // again: nothing more
			if n := h.Tasks(); n != 0 {
				t.Errorf("streams of %d tasks left after Stop", n)
			}
		})
	}
}
