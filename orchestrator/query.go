package orchestrator

import (
	"github.com/chiffon-dev/chiffon/envelope"
)

// Task returns a snapshot of one task.
func (o *Orchestrator) Task(id string) (*Task, error) {
	var c *Task
	var end *commit
	_ = o.call(func() {
		if r := o.runs[id]; r != nil {
			c = cloneTask(r.t)
			if r.finished {
				end = r.written // its end shows once it is stored
			}
		}
	})
	if c == nil {
		return o.st.Task(id)
	}
	_ = end.wait()
	return c, nil
}

// ListOptions filters a task list.
type ListOptions struct {
	// State keeps tasks in this state; "" keeps all.
	State State
	// AgentType keeps tasks for this agent type; "" keeps all.
	AgentType envelope.AgentType
	// AgentID keeps tasks last sent to this agent; "" keeps all.
	AgentID string
	// WorkType keeps tasks of this work type; "" keeps all.
	WorkType string
	// Offset skips this many of the tasks kept, newest first: a page.
	Offset int
	// Limit bounds the number of tasks; 0 means 100.
	Limit int
}

// Tasks lists tasks, newest first.
func (o *Orchestrator) Tasks(opts ListOptions) ([]*Task, error) {
	if opts.Limit <= 0 {
		opts.Limit = 100
	}
	var live map[string]*Task
	_ = o.call(func() {
		live = make(map[string]*Task, len(o.runs))
		for id, r := range o.runs {
			live[id] = cloneTask(r.t)
		}
	})
	keep := func(t *Task) bool {
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
func (o *Orchestrator) History(id string) ([]*Event, error) {
	if _, err := o.Task(id); err != nil {
		return nil, err
	}
	o.waitWritten(id)
	out := []*Event{}
	err := o.st.Events(id, 0, func(ev *Event) error {
		if ev.Type != EventStatus {
			out = append(out, ev)
		}
		return nil
	})
	return out, err
}
