package core

import "github.com/chiffon-dev/chiffon/orchestrator/watch"

// Watcher is one live stream of one task (watch.Watcher).
type Watcher = watch.Watcher

// feedWatchers is the reader of the core's events that feeds the live streams
// of single tasks (watchers).
func (o *Core) feedWatchers(ev Event) {
	switch ev.Kind {
	case TaskStep:
		o.watchers.Step(ev.TaskID, ev.Event)
	case TaskEnded, TaskDropped:
		o.watchers.End(ev.TaskID, ev.Task)
	case Stopped:
		o.watchers.EndAll()
	}
}

// Watch starts a live stream of task id, of up to buffer events behind (with
// buffer 0 it only learns of the end), or returns nil when the task is not
// live: ended, unknown, or the core closed.
func (o *Core) Watch(id string, buffer int) *Watcher {
	w := o.watchers.Add(id, buffer)
	live := false
	_ = o.call(func() { live = o.runs[id] != nil && !o.closed })
	if !live {
		w.Stop()
		return nil
	}
	return w
}
