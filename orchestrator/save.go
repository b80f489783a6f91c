package orchestrator

import (
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// commit is one saveAsync write: done is closed once it is committed or has failed,
// and err is then its outcome.
type commit struct {
	done chan struct{}
	err  error
	// held is the store that may hold the write for the next message's commit (see
	// handleTaskMsg), or nil.
	held TaskStore
}

// wait waits for the write and returns its outcome; a nil commit has nothing to wait
// for. A held write is committed now rather than with the next message's.
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

// save writes r's task and ev in one transaction, then sends ev to the task's SSE
// streams. Called with o.mu held, which it holds across the commit: for the rare
// steps (a retry, a cancel request, a resume) whose next step needs them stored.
func (o *Orchestrator) save(r *run, ev *Event) error {
	if err := o.write(r, ev); err != nil {
		return err
	}
	o.notify(r.t.ID, ev)
	return nil
}

// write numbers ev and writes r's task and ev in one transaction.
func (o *Orchestrator) write(r *run, ev *Event) error {
	t := r.t
	o.stamp(r, ev)
	errc := make(chan error, 1)
	o.st.Save(&task.Write{ID: t.ID, Task: t, Events: []*Event{ev}}, func(err error) { errc <- err })
	if err := <-errc; err != nil {
		r.log.Error("store task", "err", err)
		return err
	}
	return nil
}

// saveAsync numbers evs (see stamp) and writes r's task and evs in one transaction
// without waiting for it, so that o.mu is not held across a commit. The write is
// queued behind the earlier ones; r.written is the last one, which a reader of the
// stored history waits for. then, when not nil, runs once the write is committed or
// has failed, with o.mu held: a step that must follow the write (a work_request
// sent, a result made visible) goes there. It may run on the committing goroutine,
// so it must not write synchronously (save) nor wait for a commit; a step that does
// goes through o.later. Called with o.mu held.
func (o *Orchestrator) saveAsync(r *run, evs []*Event, then func(error)) {
	o.queueWrite(r, &task.Write{ID: r.t.ID, Task: r.t, Events: evs}, then)
}

// saveStatus writes a work_status event and its output piece as saveAsync does, but
// not the task's record. A status changes the task's steps, progress and output,
// which the record gets at its next save and recover rebuilds from the status events
// after a crash, and moves it from dispatched to running, which recover treats alike:
// either may have reached the agent. Called with o.mu held.
func (o *Orchestrator) saveStatus(r *run, ev *Event, piece task.Piece) {
	o.queueWrite(r, &task.Write{ID: r.t.ID, Events: []*Event{ev}, Output: piece}, nil)
}

func (o *Orchestrator) queueWrite(r *run, w *task.Write, then func(error)) {
	t := r.t
	o.stamp(r, w.Events...)
	c := &commit{done: make(chan struct{})}
	if o.moreComing && !o.closed {
		c.held, w.MoreComing = o.st, true
	}
	r.written = c
	o.wg.Add(1) // Close waits for then, and closes the store after the write
	o.st.Save(w, func(err error) {
		if err != nil {
			o.log.Error("store task", "task_id", t.ID, "err", err)
		}
		c.err = err
		// Most often o.mu is free, and then runs here at once, before a waiter on c
		// wakes up to take o.mu. Otherwise the committing goroutine must not wait
		// for it: the holder may be waiting for a commit queued behind this one.
		if then != nil && o.mu.TryLock() {
			then(err)
			o.mu.Unlock()
			then = nil
		}
		close(c.done)
		if then == nil {
			o.wg.Done()
			return
		}
		go func() {
			defer o.wg.Done()
			o.mu.Lock()
			defer o.mu.Unlock()
			then(err)
		}()
	})
}

// waitWritten waits until every saveAsync write of live task id so far is
// committed, so that a read of its stored history or output sees what was sent.
func (o *Orchestrator) waitWritten(id string) {
	o.mu.Lock()
	var c *commit
	if r := o.runs[id]; r != nil {
		c = r.written
	}
	o.mu.Unlock()
	_ = c.wait()
}

// stamp numbers the events of evs not numbered yet, with r's state now.
func (o *Orchestrator) stamp(r *run, evs ...*Event) {
	t := r.t
	t.UpdatedAt = time.Now().UTC()
	for _, ev := range evs {
		if ev.Seq != 0 {
			continue
		}
		r.seq++
		ev.Seq, ev.At, ev.State = r.seq, t.UpdatedAt, t.State
	}
}

// later runs fn with o.mu held on a goroutine of its own, unless the orchestrator has
// closed: for a step decided where it must not run, such as a synchronous write on
// the committing goroutine or routing inside the breaker's lock. Called with o.mu
// held.
func (o *Orchestrator) later(fn func()) {
	if o.closed {
		return // Close may be waiting on o.wg: nothing may join it now
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		o.mu.Lock()
		defer o.mu.Unlock()
		if !o.closed {
			fn()
		}
	}()
}
