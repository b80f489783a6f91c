// Package watch keeps the live streams of single tasks: an SSE stream of a
// task's events, or a Wait that learns only of its end. The core feeds a Hub
// from its ordered stream of events (a step, an end, its own stop); a stream
// that falls behind is ended, and its client reconnects and replays from the
// store. A Hub is safe for concurrent use.
package watch

import (
	"sync"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// Hub is the live streams of the tasks, by task. The zero value is ready.
type Hub struct {
	mu     sync.Mutex
	byTask map[string]map[*Watcher]struct{}
}

// Watcher is one live stream of one task.
type Watcher struct {
	hub    *Hub
	id     string
	ch     chan *task.Event // unbuffered for a Wait, which is told only of the end
	closed bool
	final  *task.Task // the ended task, set before ch is closed at its end
}

// Events are the task's events as they happen. The channel is closed at the
// task's end (then Final is set), when the reader falls behind, or when the
// hub's feeder stops.
func (w *Watcher) Events() <-chan *task.Event { return w.ch }

// Final is the ended task once Events is closed at its end, else nil. It is
// shared: copy it to change it.
func (w *Watcher) Final() *task.Task { return w.final }

// Stop ends w; its reader leaves.
func (w *Watcher) Stop() {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	w.hub.end(w.id, w, nil)
}

// Add starts a stream of task id, of up to buffer events behind; with buffer
// 0 it only learns of the end.
func (h *Hub) Add(id string, buffer int) *Watcher {
	w := &Watcher{hub: h, id: id, ch: make(chan *task.Event, buffer)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byTask == nil {
		h.byTask = map[string]map[*Watcher]struct{}{}
	}
	if h.byTask[id] == nil {
		h.byTask[id] = map[*Watcher]struct{}{}
	}
	h.byTask[id][w] = struct{}{}
	return w
}

// Tasks is the number of tasks with a live stream.
func (h *Hub) Tasks() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byTask)
}

// end closes w, handing it final, and forgets it.
func (h *Hub) end(id string, w *Watcher, final *task.Task) {
	if !w.closed {
		w.final, w.closed = final, true
		close(w.ch)
	}
	if ws := h.byTask[id]; ws != nil {
		delete(ws, w)
		if len(ws) == 0 {
			delete(h.byTask, id)
		}
	}
}

// Step hands task id's new event to its streams; one that has no room for it
// is ended (a Wait is not told).
func (h *Hub) Step(id string, ev *task.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.byTask[id] {
		if cap(w.ch) == 0 {
			continue // a Wait
		}
		select {
		case w.ch <- ev:
		default:
			h.end(id, w, nil) // too slow: it will reconnect and replay
		}
	}
}

// End ends task id's streams: with ended, the task at its end, cloned once
// and shared by them; with nil for a task dropped without an end.
func (h *Hub) End(id string, ended *task.Task) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.byTask[id]
	var final *task.Task
	if ended != nil && len(ws) > 0 {
		final = ended.Clone()
	}
	for w := range ws {
		h.end(id, w, final)
	}
}

// EndAll ends every stream, without a task: the feeder stopped.
func (h *Hub) EndAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, ws := range h.byTask {
		for w := range ws {
			h.end(id, w, nil)
		}
	}
}
