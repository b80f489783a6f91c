package orchestrator

import (
	"sync"
)

// The loop is the one owner of the orchestrator's state: the live tasks (runs), the
// agents, the queues and the watchers. Everything that changes them is a job posted
// to its mailbox, and the jobs run one at a time, in the order posted, each to its
// end: NATS handlers, timers, store completions and API calls only post. A job that
// must wait (a commit, a request to an agent) does not wait in the loop: it starts
// the wait elsewhere, and its end is another job.
//
// The loop has no goroutine of its own. Whoever posts a job while no jobs run runs
// the loop on its own goroutine until the mailbox is empty; a job posted while the
// loop runs waits for it. So a NATS message, a commit's completion or an API call
// meets no hand-over to another goroutine when the orchestrator is not busy, and the
// jobs of a busy one run back to back in one goroutine. Jobs never block, which is
// what makes it safe to run them on any goroutine that posts, even a store's
// committing goroutine.
//
// The mailbox is unbounded, so that posting never blocks. What fills it is bounded
// elsewhere: the NATS subscriptions' pending limits, the API's callers, one timer of
// each kind per task.
//
// Writes group into commits: a job run while more jobs wait behind it tells the store
// more writes are coming (task.Write.MoreComing), and the loop flushes the store when
// the mailbox runs dry. A short task's acknowledgement and result, which often
// arrive together, share one commit.

// mailbox is the loop's queue of jobs.
type mailbox struct {
	mu      sync.Mutex
	jobs    []func()
	spare   []func()
	running bool // a goroutine runs the loop
	closed  bool
	idle    sync.Cond // broadcast when running turns false
}

func newMailbox() *mailbox {
	m := &mailbox{}
	m.idle.L = &m.mu
	return m
}

// len is the number of jobs waiting.
func (m *mailbox) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.jobs)
}

// maxHeld bounds the writes held for one commit while jobs keep coming.
const maxHeld = 128

// post queues job and runs the loop when nobody does; it reports false when the
// orchestrator has closed. Jobs post too (a job queued from a job runs after it).
func (o *Orchestrator) post(job func()) bool {
	m := o.mail
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return false
	}
	m.jobs = append(m.jobs, job)
	if m.running {
		m.mu.Unlock()
		return true
	}
	m.running = true
	m.mu.Unlock()
	o.runLoop()
	return true
}

// runLoop runs the jobs queued, in batches, until none is left.
func (o *Orchestrator) runLoop() {
	m := o.mail
	for {
		m.mu.Lock()
		jobs := m.jobs
		if len(jobs) == 0 {
			if o.held == 0 {
				m.running = false
				m.idle.Broadcast()
				m.mu.Unlock()
				return
			}
			m.mu.Unlock()
			o.held = 0
			o.st.Flush() // then look again: nothing may have come meanwhile
			continue
		}
		m.jobs, m.spare = m.spare[:0], nil
		m.mu.Unlock()
		for i, job := range jobs {
			o.moreComing = i < len(jobs)-1
			job()
			jobs[i] = nil
		}
		o.moreComing = false
		m.mu.Lock()
		m.spare = jobs
		m.mu.Unlock()
	}
}

// closeMailbox stops the loop taking jobs and waits for the jobs queued to run.
func (o *Orchestrator) closeMailbox() {
	m := o.mail
	m.mu.Lock()
	m.closed = true
	for m.running {
		m.idle.Wait()
	}
	m.mu.Unlock()
}

// call runs job on the loop and waits for it. It returns ErrClosed, without running
// job, once the orchestrator has closed. A job must not call it: it would wait for
// itself.
func (o *Orchestrator) call(job func()) error {
	done := make(chan struct{})
	if !o.post(func() { job(); close(done) }) {
		return ErrClosed
	}
	<-done
	return nil
}

// deliver applies ev to r and carries out the effects.
func (o *Orchestrator) deliver(r *run, ev event) {
	if o.closed {
		return // the tasks resume at the next Open
	}
	before := r.t.State
	effs := o.m.apply(r, ev)
	o.countState(before, r.t.State)
	for _, eff := range effs {
		o.do(r, eff)
	}
}

// countState keeps the tasks-by-state gauge right after a task moved from before to
// after.
func (o *Orchestrator) countState(before, after State) {
	if after != before {
		o.metrics.tasks.WithLabelValues(string(before)).Dec()
		o.metrics.tasks.WithLabelValues(string(after)).Inc()
	}
}

// deliverLater posts ev for r to the loop.
func (o *Orchestrator) deliverLater(r *run, ev event) {
	o.post(func() { o.deliver(r, ev) })
}
