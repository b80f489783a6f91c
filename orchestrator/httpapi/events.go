package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// watcherBuffer is how many live events a slow SSE client may fall behind before its
// stream is ended (it reconnects with Last-Event-ID and replays from the store).
const watcherBuffer = 512

// serveEvents streams a task's events: first the stored history (after
// Last-Event-ID when given), then live events until the task ends.
func (a *API) serveEvents(w http.ResponseWriter, req *http.Request, id string) {
	if _, err := a.core.Task(id); err != nil {
		writeTaskErr(w, err)
		return
	}
	var after int64
	if v := req.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "invalid_field", "Last-Event-ID", "must be an event number")
			return
		}
		after = n
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "internal", "", "streaming unsupported")
		return
	}
	// Subscribe before reading the history, so no event falls between the two, and
	// let the writes of the events sent so far land first.
	live, stop := a.core.Watch(id, watcherBuffer)
	if live != nil {
		defer stop()
	}
	a.core.WaitWritten(id)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	errStop := errors.New("stop")
	err := a.st.Events(id, after, func(ev *task.Event) error {
		after = ev.Seq
		if writeEvent(w, ev) != nil {
			return errStop
		}
		return nil
	})
	flusher.Flush()
	if err == nil && live == nil && a.inGroup {
		a.followStore(w, req, id, after)
		return
	}
	if err != nil || live == nil {
		return
	}
	keepalive := time.NewTicker(sseKeepalive)
	defer keepalive.Stop()
	for {
		select {
		case <-req.Context().Done():
			return
		case <-a.done:
			return
		case <-keepalive.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case ev, ok := <-live:
			if !ok {
				// Ended: the task finished, or this stream fell behind. Send what the
				// store has beyond what was sent.
				_ = a.st.Events(id, after, func(ev *task.Event) error { return writeEvent(w, ev) })
				flusher.Flush()
				return
			}
			if ev.Seq <= after {
				continue
			}
			after = ev.Seq
			if writeEvent(w, ev) != nil {
				return
			}
			flusher.Flush()
		}
	}
}

// sseKeepalive is how often an idle stream gets a comment, so that proxies keep
// it open; storePoll is how often a standby reads a task's new events.
const (
	sseKeepalive = 15 * time.Second
	storePoll    = 250 * time.Millisecond
)

// followStore streams, on an orchestrator of a group that does not run the task
// (a standby, or a leader that took over after the stream began), the events the
// store gets after after, until the task ends: the leader writes each one there
// before it tells its own streams.
func (a *API) followStore(w http.ResponseWriter, req *http.Request, id string, after int64) {
	flusher := w.(http.Flusher)
	poll := time.NewTicker(storePoll)
	defer poll.Stop()
	idle := time.Now()
	for {
		select {
		case <-req.Context().Done():
			return
		case <-a.done:
			return
		case <-poll.C:
		}
		t, err := a.st.Task(id)
		if err != nil {
			return
		}
		sent := after
		err = a.st.Events(id, after, func(ev *task.Event) error {
			after = ev.Seq
			return writeEvent(w, ev)
		})
		if err != nil {
			return
		}
		switch {
		case after > sent:
			idle = time.Now()
		case time.Since(idle) >= sseKeepalive:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			idle = time.Now()
		}
		flusher.Flush()
		if t.State.Final() {
			return // its events were all written before its final record
		}
	}
}

func writeEvent(w http.ResponseWriter, ev *task.Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, b)
	return err
}
