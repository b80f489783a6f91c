package core

import (
	"context"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// Wait blocks until task id has finished, ctx ends or the orchestrator closes, and
// returns a snapshot of the task. It lets an embedding program (and the bench) wait
// for a result without polling.
func (o *Core) Wait(ctx context.Context, id string) (*task.Task, error) {
	for {
		w := o.Watch(id, 0)
		if w == nil { // finished, unknown, or closed
			return o.Task(id)
		}
		for open := true; open; {
			select {
			case _, open = <-w.Events():
			case <-ctx.Done():
				w.Stop()
				return nil, ctx.Err()
			}
		}
		// The watcher ends at the task's end, with the task, or when the
		// orchestrator closes.
		if final := w.Final(); final != nil {
			return final.Clone(), nil
		}
		t, err := o.Task(id)
		if err != nil || t.State.Final() {
			return t, err
		}
	}
}
