package core

import (
	"sync"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// watcherBuffer is how many live events a slow SSE client may fall behind before its
// stream is ended (it reconnects with Last-Event-ID and replays from the store).
const watcherBuffer = 512

// watchHub keeps the live streams of single tasks (an SSE stream, a Wait) and
// feeds them from the core's events (read, a Subscribe reader).
type watchHub struct {
	mu     sync.Mutex
	byTask map[string]map[*Watcher]struct{}
}

// Watcher is one live stream of one task.
type Watcher struct {
	hub    *watchHub
	id     string
	ch     chan *task.Event // unbuffered for a Wait, which is told only of the end
	closed bool
	final  *task.Task // the ended task, set before ch is closed at its end
}

// Events are the task's events as they happen. The channel is closed at the
// task's end (then Final is set), when the reader falls behind, or when the
// core stops.
func (w *Watcher) Events() <-chan *task.Event { return w.ch }

// Final is the ended task once Events is closed at its end, else nil. It is
// shared: copy it to change it.
func (w *Watcher) Final() *task.Task { return w.final }

// Stop ends w; its reader leaves.
func (w *Watcher) Stop() { w.hub.remove(w) }

// add registers a stream of task id, of up to buffer events behind; with buffer
// 0 it only learns of the end.
func (h *watchHub) add(id string, buffer int) *Watcher {
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

// remove ends w, a stream its reader leaves.
func (h *watchHub) remove(w *Watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.end(w.id, w, nil)
}

// end closes w, handing it final, and forgets it.
func (h *watchHub) end(id string, w *Watcher, final *task.Task) {
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

// read takes one of the core's events.
func (h *watchHub) read(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch ev.Kind {
	case TaskStep:
		for w := range h.byTask[ev.TaskID] {
			if cap(w.ch) == 0 {
				continue // a Wait
			}
			select {
			case w.ch <- ev.Event:
			default:
				h.end(ev.TaskID, w, nil) // too slow: it will reconnect and replay
			}
		}
	case TaskEnded, TaskDropped:
		ws := h.byTask[ev.TaskID]
		var final *task.Task
		if ev.Task != nil && len(ws) > 0 {
			final = ev.Task.Clone() // one copy, shared by its readers
		}
		for w := range ws {
			h.end(ev.TaskID, w, final)
		}
	case Stopped:
		for id, ws := range h.byTask {
			for w := range ws {
				h.end(id, w, nil)
			}
		}
	}
}

// Watch starts a live stream of task id, of up to buffer events behind (with
// buffer 0 it only learns of the end), or returns nil when the task is not
// live: ended, unknown, or the core closed.
func (o *Core) Watch(id string, buffer int) *Watcher {
	w := o.watchers.add(id, buffer)
	live := false
	_ = o.call(func() { live = o.runs[id] != nil && !o.closed })
	if !live {
		w.Stop()
		return nil
	}
	return w
}
