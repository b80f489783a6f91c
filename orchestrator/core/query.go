package core

import (
	"errors"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// Task returns a snapshot of one task.
func (o *Core) Task(id string) (*task.Task, error) {
	ts, err := o.TasksByID([]string{id})
	if err != nil {
		return nil, err
	}
	if t := ts[id]; t != nil {
		return t, nil
	}
	return nil, task.ErrNotFound
}

// TasksByID returns snapshots of the tasks ids name, by id: the live ones from
// the loop in one call (an ended one once its end is stored), the others from
// the store. A task the store does not hold is left out.
func (o *Core) TasksByID(ids []string) (map[string]*task.Task, error) {
	out := make(map[string]*task.Task, len(ids))
	var ends []*commit
	_ = o.call(func() {
		for _, id := range ids {
			if r := o.runs[id]; r != nil {
				out[id] = r.t.Clone()
				if r.finished {
					ends = append(ends, r.written) // its end shows once it is stored
				}
			}
		}
	})
	for _, c := range ends {
		_ = c.wait()
	}
	if err := StoredTasks(o.st, ids, out); err != nil {
		return nil, err
	}
	return out, nil
}

// StoredTasks adds to out, by id, each task of ids that out lacks and st
// holds: what TasksByID reads from the store, and all a standby reads.
func StoredTasks(st task.Store, ids []string, out map[string]*task.Task) error {
	for _, id := range ids {
		if out[id] != nil {
			continue
		}
		t, err := st.Task(id)
		switch {
		case errors.Is(err, task.ErrNotFound):
		case err != nil:
			return err
		default:
			out[id] = t
		}
	}
	return nil
}

// Tasks lists tasks, newest first: the live ones as they are now.
func (o *Core) Tasks(opts api.ListOptions) ([]*task.Task, error) {
	var live map[string]*task.Task
	_ = o.call(func() {
		live = make(map[string]*task.Task, len(o.runs))
		for id, r := range o.runs {
			live[id] = r.t.Clone()
		}
	})
	return ListTasks(o.st, opts, live)
}

// ListTasks lists the tasks st holds, newest first, each as live has it when
// live holds it: what Tasks answers, and a standby's list from the store alone.
func ListTasks(st task.Store, opts api.ListOptions, live map[string]*task.Task) ([]*task.Task, error) {
	if opts.Limit <= 0 {
		opts.Limit = 100
	}
	keep := func(t *task.Task) bool {
		if l := live[t.ID]; l != nil {
			*t = *l
		}
		return (opts.State == "" || t.State == opts.State) && (opts.AgentType == "" || t.ToAgent == opts.AgentType) &&
			(opts.AgentID == "" || t.AgentID == opts.AgentID) && (opts.WorkType == "" || t.WorkType == opts.WorkType)
	}
	tasks, err := st.Tasks(keep, opts.Offset+opts.Limit)
	if err != nil || opts.Offset >= len(tasks) {
		return nil, err
	}
	return tasks[opts.Offset:], nil
}

// History returns task id's audit trail: each stored event but its progress
// reports (status events), oldest first, saying what changed the task, when,
// and by which API token when a request did.
func (o *Core) History(id string) ([]*task.Event, error) {
	o.WaitWritten(id)
	return StoredHistory(o.st, id)
}

// StoredHistory is task id's audit trail as st holds it (see History).
func StoredHistory(st task.Store, id string) ([]*task.Event, error) {
	if _, err := st.Task(id); err != nil {
		return nil, err
	}
	out := []*task.Event{}
	err := st.Events(id, 0, func(ev *task.Event) error {
		if ev.Type != task.EventStatus {
			out = append(out, ev)
		}
		return nil
	})
	return out, err
}
