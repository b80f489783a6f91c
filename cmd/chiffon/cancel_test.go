package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestCancelPrintsTheStateTheTaskReaches: the cancel is accepted while the task
// runs; cancel prints the state the task ends in, or within --wait, that it is
// still cancelling.
func TestCancelPrintsTheStateTheTaskReaches(t *testing.T) {
	cases := []struct {
		name string
		ends bool // whether the task ends within --wait
		want string
	}{
		{"it ends", true, "task t1 cancelled\n"},
		{"it does not end in time", false, "task t1 still cancelling (running after 200ms); chiffon watch t1 follows it\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				state := task.StateRunning
				switch r.URL.Path {
				case "/api/v1/tasks/t1/events":
					w.Header().Set("Content-Type", "text/event-stream")
					if !tc.ends {
						w.(http.Flusher).Flush()
						<-r.Context().Done() // the stream stays open: the task runs on
						return
					}
					b, _ := json.Marshal(&task.Event{Seq: 1, Type: task.EventResult, State: task.StateCancelled})
					fmt.Fprintf(w, "id: 1\nevent: result\ndata: %s\n\n", b)
					return
				case "/api/v1/tasks/t1/cancel":
					w.WriteHeader(http.StatusAccepted)
				case "/api/v1/tasks/t1":
					if tc.ends {
						state = task.StateCancelled
					}
				default:
					http.NotFound(w, r)
					return
				}
				_ = json.NewEncoder(w).Encode(&task.Task{ID: "t1", State: state})
			}))
			defer srv.Close()
			t.Setenv("CHIFFON_API_TOKEN", "tok")
			code, out, errOut := runCLI(t, "", "cancel", "t1", "--wait", "200ms", "--server", srv.URL)
			if code != 0 || out != tc.want || strings.TrimSpace(errOut) != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %q", code, out, errOut, tc.want)
			}
		})
	}
}
