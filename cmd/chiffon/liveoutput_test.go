package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// outputEvent is a status event carrying data at off of the whole output.
func outputEvent(off int64, data string) *task.Event {
	return &task.Event{Type: task.EventStatus, State: task.StateRunning, OutputOffset: &off,
		Status: &envelope.WorkStatus{Status: envelope.StatusRunning, Step: envelope.Step{Output: data}}}
}

// TestWatchPrintsOutputExactlyAcrossAResumedStream: the event stream drops and is
// resumed with Last-Event-ID; the events after it repeat bytes already printed,
// and the last bytes come in no event. Stdout holds the output exactly once.
func TestWatchPrintsOutputExactlyAcrossAResumedStream(t *testing.T) {
	const whole = "one\ntwo\nthree\nfour\n"
	var mu sync.Mutex
	streams, lastIDs := 0, []string{}
	send := func(w http.ResponseWriter, evs ...*task.Event) {
		for _, ev := range evs {
			b, _ := json.Marshal(ev)
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, b)
		}
	}
	seq := func(e *task.Event, n int64) *task.Event { e.Seq = n; return e }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/api/v1/tasks/t1/events":
			streams++
			lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
			w.Header().Set("Content-Type", "text/event-stream")
			if streams == 1 { // drops after the first piece
				send(w, &task.Event{Seq: 1, Type: task.EventState, State: task.StateRunning}, seq(outputEvent(0, "one\ntw"), 2))
				return
			}
			send(w, seq(outputEvent(4, "two\nthr"), 3), seq(outputEvent(0, "one\n"), 4), seq(outputEvent(11, "ee\n"), 5),
				&task.Event{Seq: 6, Type: task.EventResult, State: task.StateSucceeded,
					Result: &envelope.WorkResult{Status: envelope.ResultSuccess}})
		case "/api/v1/tasks/t1":
			st := task.StateRunning
			if streams > 1 {
				st = task.StateSucceeded
			}
			_ = json.NewEncoder(w).Encode(&task.Task{ID: "t1", State: st, OutputBytes: int64(len(whole)), OutputComplete: true,
				Result: &task.Result{Status: envelope.ResultSuccess}})
		case "/api/v1/tasks/t1/output":
			_, _ = w.Write([]byte(whole))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	t.Setenv("CHIFFON_API_TOKEN", "tok")
	code, out, errOut := runCLI(t, "", "watch", "t1", "--server", srv.URL)
	if code != 0 || out != whole {
		t.Fatalf("exit %d, stdout %q, want %q; stderr:\n%s", code, out, whole, errOut)
	}
	if mu.Lock(); len(lastIDs) < 2 || lastIDs[1] != "2" {
		t.Fatalf("the stream was not resumed after event 2: Last-Event-ID %q", lastIDs)
	}
	mu.Unlock()
}

// TestAWaitThatLosesItsOrchestratorSaysSo: when every orchestrator stays away
// until the follow gives up, submit --wait/watch exits 75 saying it lost track
// of the task, not with an exit code the task could have had.
func TestAWaitThatLosesItsOrchestratorSaysSo(t *testing.T) {
	old := client.FollowGiveUp
	client.FollowGiveUp = 300 * time.Millisecond
	t.Cleanup(func() { client.FollowGiveUp = old })
	var streams atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/tasks/t1/events" && streams.Add(1) == 1 {
			w.Header().Set("Content-Type", "text/event-stream")
			b, _ := json.Marshal(&task.Event{Seq: 1, Type: task.EventState, State: task.StateRunning})
			fmt.Fprintf(w, "id: 1\nevent: state\ndata: %s\n\n", b)
			return // the stream ends; the orchestrator is gone from now on
		}
		writeAPIError(w, http.StatusServiceUnavailable, "unavailable", "", "no orchestrator leads")
	}))
	defer srv.Close()
	t.Setenv("CHIFFON_API_TOKEN", "tok")
	code, _, errOut := runCLI(t, "", "watch", "t1", "--server", srv.URL)
	if code != exitNotFinished || !strings.Contains(errOut, "lost track of the task") {
		t.Fatalf("exit %d, stderr %q; want 75, lost track", code, errOut)
	}
}
