package core

import (
	"reflect"
	"testing"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestWatchHubFollowsTheStream: what each event of the core's stream does to a
// task's live streams (an SSE stream with room for one event, a Wait) and to
// another task's.
func TestWatchHubFollowsTheStream(t *testing.T) {
	ended := &task.Task{ID: "a", State: task.StateSucceeded}
	step := &task.Event{Seq: 1, Type: task.EventStatus}
	cases := []struct {
		name   string
		events []Event
		// sse: events the SSE stream got and whether it is closed; wait: whether
		// the Wait is closed, and with the ended task.
		sseGot             int
		sseClosed, waitEnd bool
		final              *task.Task
	}{
		{name: "a step reaches the stream, not the wait",
			events: []Event{{Kind: TaskStep, TaskID: "a", Event: step}}, sseGot: 1},
		{name: "another task's step reaches nobody",
			events: []Event{{Kind: TaskStep, TaskID: "b", Event: step}}},
		{name: "a stream that falls behind is closed",
			events: []Event{{Kind: TaskStep, TaskID: "a", Event: step}, {Kind: TaskStep, TaskID: "a", Event: step}},
			sseGot: 1, sseClosed: true},
		{name: "the end closes both with the task",
			events: []Event{{Kind: TaskEnded, TaskID: "a", Task: ended}}, sseClosed: true, waitEnd: true, final: ended},
		{name: "a task dropped closes both without one",
			events: []Event{{Kind: TaskDropped, TaskID: "a"}}, sseClosed: true, waitEnd: true},
		{name: "the core stopping closes both without one",
			events: []Event{{Kind: Stopped}}, sseClosed: true, waitEnd: true},
		{name: "another task's end closes nothing",
			events: []Event{{Kind: TaskEnded, TaskID: "b", Task: ended}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var o Core
			sse, wait := o.watchers.Add("a", 1), o.watchers.Add("a", 0)
			for _, ev := range tc.events {
				o.feedWatchers(ev)
			}
			got, closed := 0, false
			for done := false; !done; {
				select {
				case _, ok := <-sse.Events():
					if !ok {
						closed, done = true, true
					} else {
						got++
					}
				default:
					done = true
				}
			}
			if got != tc.sseGot || closed != tc.sseClosed {
				t.Errorf("SSE stream: got %d events, closed %v; want %d, %v", got, closed, tc.sseGot, tc.sseClosed)
			}
			waitClosed := false
			select {
			case _, open := <-wait.Events():
				waitClosed = !open
			default:
			}
			if waitClosed != tc.waitEnd || !reflect.DeepEqual(wait.Final(), tc.final) {
				t.Errorf("wait: closed %v with %v; want %v with %v", waitClosed, wait.Final(), tc.waitEnd, tc.final)
			}
			sse.Stop()
			wait.Stop()
			if n := o.watchers.Tasks(); n != 0 {
				t.Errorf("streams of %d tasks left after Stop", n)
			}
		})
	}
}
