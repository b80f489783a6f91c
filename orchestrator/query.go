package orchestrator

import (
	"errors"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// Task returns a snapshot of one task.
func (o *Orchestrator) Task(id string) (*task.Task, error) {
	ts, err := o.tasksByID([]string{id})
	if err != nil {
		return nil, err
	}
	if t := ts[id]; t != nil {
		return t, nil
	}
	return nil, task.ErrNotFound
}

// tasksByID returns snapshots of the tasks ids name, by id: the live ones from
// the loop in one call (an ended one once its end is stored), the others from
// the store. A task the store does not hold is left out.
func (o *Orchestrator) tasksByID(ids []string) (map[string]*task.Task, error) {
	out := make(map[string]*task.Task, len(ids))
	var ends []*commit
	_ = o.call(func() {
		for _, id := range ids {
			if r := o.runs[id]; r != nil {
				out[id] = cloneTask(r.t)
				if r.finished {
					ends = append(ends, r.written) // its end shows once it is stored
				}
			}
		}
	})
	for _, c := range ends {
		_ = c.wait()
	}
	for _, id := range ids {
		if out[id] != nil {
			continue
		}
		t, err := o.st.Task(id)
		switch {
		case errors.Is(err, task.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			out[id] = t
		}
	}
	return out, nil
}

// Tasks lists tasks, newest first.
func (o *Orchestrator) Tasks(opts api.ListOptions) ([]*task.Task, error) {
	if opts.Limit <= 0 {
		opts.Limit = 100
	}
	var live map[string]*task.Task
	_ = o.call(func() {
		live = make(map[string]*task.Task, len(o.runs))
		for id, r := range o.runs {
			live[id] = cloneTask(r.t)
		}
	})
	keep := func(t *task.Task) bool {
		if l := live[t.ID]; l != nil {
			*t = *l
		}
		return (opts.State == "" || t.State == opts.State) && (opts.AgentType == "" || t.ToAgent == opts.AgentType) &&
			(opts.AgentID == "" || t.AgentID == opts.AgentID) && (opts.WorkType == "" || t.WorkType == opts.WorkType)
	}
	tasks, err := o.st.Tasks(keep, opts.Offset+opts.Limit)
	if err != nil || opts.Offset >= len(tasks) {
		return nil, err
	}
	return tasks[opts.Offset:], nil
}

// History returns task id's audit trail: each stored event but its progress
// reports (status events), oldest first, saying what changed the task, when,
// and by which API token when a request did.
func (o *Orchestrator) History(id string) ([]*task.Event, error) {
	if _, err := o.Task(id); err != nil {
		return nil, err
	}
	o.waitWritten(id)
	out := []*task.Event{}
	err := o.st.Events(id, 0, func(ev *task.Event) error {
		if ev.Type != task.EventStatus {
			out = append(out, ev)
		}
		return nil
	})
	return out, err
}
