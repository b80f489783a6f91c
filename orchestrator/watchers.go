package orchestrator

import (
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// watcher is one live SSE stream of one task, or one Wait.
type watcher struct {
	ch     chan *task.Event // unbuffered for a Wait, which is told only of the end
	closed bool
	final  *task.Task // the finished task, set before ch is closed at its end
}

func (w *watcher) close() {
	if !w.closed {
		w.closed = true
		close(w.ch)
	}
}

// watch registers a live stream for task id, of up to buffer events behind; with
// buffer 0 it only learns of the end. It returns nil when the task has already
// finished, or the orchestrator has closed.
func (o *Orchestrator) watch(id string, buffer int) *watcher {
	var w *watcher
	_ = o.call(func() {
		if o.runs[id] == nil || o.closed {
			return
		}
		w = &watcher{ch: make(chan *task.Event, buffer)}
		if o.watchers[id] == nil {
			o.watchers[id] = map[*watcher]struct{}{}
		}
		o.watchers[id][w] = struct{}{}
	})
	return w
}

// unwatch ends a live stream its reader leaves.
func (o *Orchestrator) unwatch(id string, w *watcher) {
	_ = o.call(func() { // once closed, Close has ended every stream
		if ws := o.watchers[id]; ws != nil {
			delete(ws, w)
			if len(ws) == 0 {
				delete(o.watchers, id)
			}
		}
		w.close()
	})
}

// notify sends ev to task id's live streams.
func (o *Orchestrator) notify(id string, ev *task.Event) {
	for w := range o.watchers[id] {
		if cap(w.ch) == 0 {
			continue // a Wait
		}
		select {
		case w.ch <- ev:
		default:
			w.close() // too slow: it will reconnect and replay
			delete(o.watchers[id], w)
		}
	}
}

// closeWatchers ends task id's live streams after its last event, handing each the
// finished task (shared: readers copy it).
func (o *Orchestrator) closeWatchers(id string, final *task.Task) {
	for w := range o.watchers[id] {
		w.final = final
		w.close()
	}
	delete(o.watchers, id)
}
