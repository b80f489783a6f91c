package orchestrator_test

import (
	"bufio"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
)

// streamEventIDs reads task id's raw SSE stream, resumed after lastEventID ("" for
// none), until the server ends it, and sends each event's id on ids, which it then
// closes. It reads the wire, not Client.Events, which itself skips what it has seen.
func streamEventIDs(t *testing.T, c *client.Client, id, lastEventID string, ids chan<- int64) {
	defer close(ids)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, c.BaseURL+"/api/v1/tasks/"+id+"/events", nil)
	if err != nil {
		t.Error(err)
		return
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		if t.Context().Err() == nil { // not the test ending early
			t.Errorf("events: %v", err)
		}
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("events: HTTP %d", resp.StatusCode)
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Errorf("event id %q: %v", v, err)
				return
			}
			ids <- n
		}
	}
}

// collectIDs reads ids until the stream ends.
func collectIDs(t *testing.T, ids <-chan int64) []int64 {
	t.Helper()
	var got []int64
	for {
		select {
		case n, ok := <-ids:
			if !ok {
				return got
			}
			got = append(got, n)
		case <-time.After(wait):
			t.Fatalf("event stream did not end; ids so far %v", got)
		}
	}
}

// seqRange is from, from+1, ..., to.
func seqRange(from, to int64) []int64 {
	var s []int64
	for n := from; n <= to; n++ {
		s = append(s, n)
	}
	return s
}

// TestEventStreamResumesAfterLastEventID: a stream opened with Last-Event-ID sends
// exactly the events after it, each once and in order: from the history and then
// live while the task runs, and from the history alone once it has finished.
func TestEventStreamResumesAfterLastEventID(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		e := newStoreEnv(t, kind, "code-1")
		o, a := e.openWithAgent("code-1", 4)
		c := e.client(o)
		task := submit(t, o, nil)
		w := a.next()
		a.ack(w)
		a.status(w, 50, 1, "one\n", "", 0)
		waitFor(t, "the first status", func() bool {
			tk, err := o.Task(task.ID)
			return err == nil && tk.ProgressPercent == 50
		})

		// Running: resume after event 2; the history from 3 comes first, then live.
		ids := make(chan int64, 64)
		go streamEventIDs(t, c, task.ID, "2", ids)
		var live []int64
		select {
		case n := <-ids:
			live = append(live, n)
		case <-time.After(wait):
			t.Fatal("no event on the resumed stream")
		}
		a.status(w, 80, 2, "two\n", "", 4)
		a.result(w, envelope.ResultSuccess, 0, "one\ntwo\n", nil)
		live = append(live, collectIDs(t, ids)...)
		final := waitFinal(t, o, task.ID)

		// Finished: the whole history, then resumed at three points of it.
		whole := make(chan int64, 64)
		go streamEventIDs(t, c, task.ID, "", whole)
		all := collectIDs(t, whole)
		last := int64(len(all))
		if !slices.Equal(all, seqRange(1, last)) || last < 5 {
			t.Fatalf("whole stream of the %s task: ids %v, want 1..n with n >= 5", final.State, all)
		}
		if want := seqRange(3, last); !slices.Equal(live, want) {
			t.Fatalf("stream resumed after 2 while running: ids %v, want %v", live, want)
		}
		for _, after := range []int64{1, last - 2, last} {
			ids := make(chan int64, 64)
			go streamEventIDs(t, c, task.ID, strconv.FormatInt(after, 10), ids)
			if got, want := collectIDs(t, ids), seqRange(after+1, last); !slices.Equal(got, want) {
				t.Fatalf("finished task resumed after %d: ids %v, want %v", after, got, want)
			}
		}
	})
}
