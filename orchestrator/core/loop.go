package core

import (
	"sync"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// The loop is the one owner of the orchestrator's state: the live tasks (runs), the
// agents, the queues and the watchers. Everything that changes them is a job posted
// to its mailbox, run on its goroutine one at a time: NATS handlers, timers, store
// completions and API calls only post. A job that must wait (a commit, a request
// to an agent) does not wait on the loop: it starts the wait elsewhere, and its end
// is another job.
//
// The mailbox is unbounded, so that posting never blocks, even from a store's
// committing goroutine or from inside a job. What fills it is bounded elsewhere:
// the NATS subscriptions' pending limits, the API's callers, one timer of each kind
// per task.
//
// Writes group into commits: a job run while more jobs wait behind it in the same
// batch tells the store more writes are coming (task.Write.MoreComing), and the
// loop flushes the store when the batch ends. A short task's acknowledgement and
// result, which often arrive together, share one commit.

// mailbox is the loop's queue of jobs.
type mailbox struct {
	mu     sync.Mutex
	jobs   []func()
	wake   chan struct{}
	closed bool
}

func newMailbox() *mailbox { return &mailbox{wake: make(chan struct{}, 1)} }

// post queues job, and reports false when the loop has stopped taking jobs.
func (m *mailbox) post(job func()) bool {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return false
	}
	m.jobs = append(m.jobs, job)
	first := len(m.jobs) == 1
	m.mu.Unlock()
	if first {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// take returns the jobs queued, waiting for one; it returns nil once the mailbox is
// closed and empty. spare is reused for the next jobs.
func (m *mailbox) take(spare []func()) []func() {
	for {
		m.mu.Lock()
		jobs := m.jobs
		if len(jobs) > 0 {
			m.jobs = spare[:0]
			m.mu.Unlock()
			return jobs
		}
		closed := m.closed
		m.mu.Unlock()
		if closed {
			return nil
		}
		<-m.wake
	}
}

// close stops the mailbox taking jobs; those queued still run.
func (m *mailbox) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// len is the number of jobs waiting.
func (m *mailbox) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.jobs)
}

// maxHeld bounds the writes held for one commit while jobs keep coming.
const maxHeld = 128

// loop runs the jobs until the mailbox is closed and empty.
func (o *Core) loop() {
	defer close(o.loopDone)
	var spare []func()
	for {
		jobs := o.mail.take(spare)
		if jobs == nil {
			return
		}
		for i, job := range jobs {
			o.moreComing = i < len(jobs)-1
			job()
			jobs[i] = nil
		}
		o.moreComing = false
		if o.held > 0 {
			o.held = 0
			o.st.Flush()
		}
		spare = jobs
	}
}

// post queues job for the loop; false means the orchestrator has closed.
func (o *Core) post(job func()) bool { return o.mail.post(job) }

// call runs job on the loop and waits for it. It returns ErrClosed, without running
// job, once the orchestrator has closed. A job must not call it: it would wait for
// itself.
func (o *Core) call(job func()) error {
	done := make(chan struct{})
	if !o.post(func() { job(); close(done) }) {
		return ErrClosed
	}
	<-done
	return nil
}

// deliver applies ev to r, carries out the effects and returns them. What the
// effects ask for in turn (routing r, draining a queue, the event of a failed
// publish) is data: it waits in o.next, and deliver does it once the effects are
// done, in order, with what that queues in turn. No effect applies an event
// itself; one that runs while deliver works only adds to o.next.
func (o *Core) deliver(r *run, ev event) []effect {
	if o.busy {
		o.then(followUp{r: r, ev: ev})
		return nil
	}
	o.busy = true
	effs := o.apply(r, ev)
	o.runNext()
	o.busy = false
	return effs
}

// apply applies ev to r and carries out its effects.
func (o *Core) apply(r *run, ev event) []effect {
	if o.closed || r.dropped {
		return nil // the tasks resume at the next Open, or with the next leader
	}
	before := r.t.State
	effs := o.m.apply(r, ev)
	o.countState(before, r.t.State)
	for _, eff := range effs {
		o.do(r, eff)
	}
	return effs
}

// followUp is work an effect asks the loop for: ev for r, routing r, or draining
// the queue of agents of type drain.
type followUp struct {
	r     *run
	ev    event
	drain envelope.AgentType
	// every routes each of drain's queued tasks again, even while no agent
	// has room (the registration wait ended: registration.go).
	every bool
}

// then queues f for runNext.
func (o *Core) then(f followUp) { o.next = append(o.next, f) }

// runNext does the work in o.next, in order, with what it queues in turn.
func (o *Core) runNext() {
	for i := 0; i < len(o.next); i++ {
		f := o.next[i]
		o.next[i] = followUp{}
		switch {
		case f.ev != nil:
			o.apply(f.r, f.ev)
		case f.r != nil:
			o.route(f.r)
		default:
			o.drainQueue(f.drain, f.every)
		}
	}
	o.next = o.next[:0]
}

// drain routes the queued tasks of typ while agents have room, now or, while
// deliver works, after the effects being carried out.
func (o *Core) drain(typ envelope.AgentType) { o.drainWith(followUp{drain: typ}) }

// drainWith queues f, a drain, and runs it unless deliver is at work.
func (o *Core) drainWith(f followUp) {
	o.then(f)
	if !o.busy {
		o.busy = true
		o.runNext()
		o.busy = false
	}
}

// countState keeps the tasks-by-state gauge right after a task moved from before to
// after.
func (o *Core) countState(before, after task.State) {
	if after != before {
		o.metrics.Tasks.WithLabelValues(string(before)).Dec()
		o.metrics.Tasks.WithLabelValues(string(after)).Inc()
	}
}

// deliverLater posts ev for r to the loop.
func (o *Core) deliverLater(r *run, ev event) {
	o.post(func() { o.deliver(r, ev) })
}

// Hold makes the loop wait, so that the jobs posted meanwhile (messages
// handled, timers run out) queue up and then run as one batch, as they do
// under load: for tests of that batching. It returns the number of jobs
// waiting and the function that lets the loop go on; both nil once the core
// has closed.
func (o *Core) Hold() (waiting func() int, resume func()) {
	running, release := make(chan struct{}), make(chan struct{})
	if !o.post(func() { close(running); <-release }) {
		return nil, nil
	}
	<-running
	return o.mail.len, sync.OnceFunc(func() { close(release) })
}
