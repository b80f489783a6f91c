package core

import (
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// commit is one write of a task: done is closed once it is committed or has failed,
// and err is then its outcome.
type commit struct {
	done chan struct{}
	err  error
	// held is the store that may hold the write for the next one's commit (see
	// loop), or nil.
	held task.Store
}

// wait waits for the write and returns its outcome; a nil commit has nothing to wait
// for. A held write is committed now rather than with the next one.
func (c *commit) wait() error {
	if c == nil {
		return nil
	}
	if c.held != nil {
		c.held.Flush()
	}
	<-c.done
	return c.err
}

// write carries out the machine's write: it queues the write behind r's earlier
// ones without waiting, and applies w.then's event once it is committed. r.written
// is the last write, which a reader of the stored history waits for. A write that
// replaces the task's output (the task's last) waits, off the loop, for the earlier
// ones, replaces the output and then saves.
func (o *Core) write(r *run, w write) {
	t := r.t
	tw := &task.Write{ID: t.ID, Events: w.events, Output: w.piece}
	if w.record {
		tw.Task = t
	}
	c := &commit{done: make(chan struct{})}
	done := func(err error) {
		if err != nil {
			o.log.Error("store task", "task_id", t.ID, "err", err)
		}
		c.err = err
		close(c.done)
		if w.then != nil {
			o.deliverLater(r, w.then(err))
		}
	}
	prev := r.written
	r.written = c
	if w.replace != nil {
		tw.Task = t.Clone() // saved off the loop
		data := *w.replace
		o.wg.Add(1) // Close closes the store after it
		go func() {
			defer o.wg.Done()
			_ = prev.wait() // the replacement reads the pieces stored so far
			if err := o.st.ReplaceOutput(t.ID, data); err != nil {
				r.log.Error("store result output", "err", err)
			}
			o.st.Save(tw, done)
		}()
		return
	}
	if o.moreComing && o.held < maxHeld {
		o.held++
		c.held, tw.MoreComing = o.st, true
	} else {
		o.held = 0 // this write commits the held ones
	}
	o.st.Save(tw, done)
}

// waitWritten waits until every write of live task id so far is committed, so that
// a read of its stored history or output sees what was sent.
// WaitWritten waits until the writes of task id made so far are stored.
func (o *Core) WaitWritten(id string) {
	var c *commit
	_ = o.call(func() {
		if r := o.runs[id]; r != nil {
			c = r.written
		}
	})
	_ = c.wait()
}
