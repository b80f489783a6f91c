// The task lifecycle: one state machine, events in, effects out.
//
// A task is submitted (or resumed after a restart), routed, dispatched to an agent,
// acknowledged by its first status, streams statuses and ends with a result; on the
// way an attempt may fail or time out and be retried after a wait, a cancel may
// come, and a deadline may end it. machine.apply takes one event for one task's run
// and returns what must happen as effects: writes, publishes, timers, notices to
// watchers, routing. It takes the time from m.now, opens no connection and touches
// no store, so that machine_test.go can drive every (state, event) pair as a table.
//
// The orchestrator's loop (loop.go) is the only caller: it owns every run, applies
// events one at a time and carries out the effects in order. NATS handlers, timers,
// HTTP calls and store completions only post events to it.
//
// This file holds the run, the events and apply, the table from event to row. The
// effects are in machine_effects.go; the rows in machine_dispatch.go (routing,
// dispatch, statuses, the queue, resume), machine_result.go (the result, the
// output cap, the task's end and its deadline), machine_attempts.go (failures,
// retries, no responders, a replaced agent) and machine_cancel.go; approval.go
// holds the approval rows.

package core

import (
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/output"
)

// run is the live state of one unfinished task. The machine owns its first part;
// the loop keeps the second, which the machine never reads.
type run struct {
	t   *task.Task
	log *slog.Logger // carries the task's ids (see taskLog)

	seq     int64 // last event number
	attempt int   // dispatches so far in this process; stale events compare it
	// gen is the silence timer's generation: a timer armed before the last
	// message or the end of an attempt carries an older one.
	gen      int
	accepted bool // the current attempt was acknowledged
	finished bool // the task has ended; its final write may be on its way
	queued   bool // it waits in its type's queue for room
	dropped  bool // the orchestrator stopped leading: its events change nothing
	// deadlineArmed says the hints.max_duration_seconds timer runs.
	deadlineArmed bool
	sentAt        time.Time
	// nonce is the last token of the current attempt's reply subject, which only
	// the agent it went to learns: a "no responders" counts only on it.
	nonce string
	bo    backoff.BackOff // waits between retries
	stick string          // the agent the next dispatch must go to
	avoid string          // an agent to pass over when others can take the task
	// pinned is the agent that may have started the request (it acknowledged an
	// attempt, or one timed out there). Every later dispatch goes to it, even after
	// an attempt that provably never reached it: only its dedupe cache can tell
	// whether the request ran, and another agent would run it a second time.
	pinned string
	out    output.Assembler // which output bytes are held
	reasks int              // re-requests for a truncated result with a gap
	// cancelWhy is the operator's reason for a cancel, "" for none.
	cancelWhy string
	// unwritten are numbered events the next write carries: a new task's
	// "submitted" goes out with whatever routing decides.
	unwritten []*task.Event
	// fresh says no write of the task has been made: a failure of its first write
	// is Submit's to answer (it drops the task).
	fresh bool

	timers  [timerKinds]*time.Timer
	agent   *agentEntry     // where the attempt counts as load
	done    func(err error) // the breaker's outcome callback for this attempt
	written *commit         // the last write
}

// machine applies events to runs. Its settings are the orchestrator's; now and
// nonce are its only sources of time and randomness.
type machine struct {
	timeouts policy.TimeoutConfig
	now      func() time.Time
	nonce    func() string
	effs     []effect
}

// ---- Events ----

// event is something that happened to one task.
type event interface{ isEvent() }

type (
	// submitted: a new task, not stored yet, submitted by the API token named by.
	submitted struct{ by string }
	// approvalDecided: an operator (the API token named by) approved the task
	// waiting for it, or rejected it, saying note.
	approvalDecided struct {
		approve  bool
		by, note string
	}
	// approvalExpired: nobody answered the approval in time.
	approvalExpired struct{}
	// resumed: an unfinished task read from the store at Open.
	resumed struct{}
	// routed: where routing sent the task (see Orchestrator.route): to agentID,
	// to its type's queue (why, when a limit holds it back), or nowhere, with err
	// (failFast: do not retry).
	routed struct {
		agentID, version string
		// stopGrace is how long the agent gives the work type's processes to
		// stop once the deadline passed (its declared cancel grace): the
		// deadline waits that much more for the result.
		stopGrace time.Duration
		queue     bool
		why       string
		err       *errcodes.Error
		failFast  bool
	}
	// stored: the write of a dispatch is committed (err nil) or failed.
	stored struct {
		attempt          int
		agentID, version string
		first            bool // the task's first write
		err              error
	}
	// sendFailed: the work_request of attempt could not be published.
	sendFailed struct {
		attempt int
		err     error
	}
	// message: a work_status, work_result or error from agentID, authenticated;
	// gpus are agentID's as it last reported them, to name those a result used.
	message struct {
		agentID string
		env     *envelope.Envelope
		gpus    []envelope.GPU
	}
	// noResponders: the server's status on the reply subject of an attempt.
	noResponders struct {
		agentID, nonce string
		lastHB         *time.Time
	}
	// silence: the ack or inactivity timer of generation gen ran out.
	silence struct {
		gen int
		why string
	}
	// deadlineDue: hints.max_duration_seconds (and the grace) ran out.
	deadlineDue struct{}
	// retryDue: the wait before the retry of attempt ran out.
	retryDue struct{ attempt int }
	// queueWaitDue: a resumed, never dispatched task waited the ack timeout for
	// its agents to register.
	queueWaitDue struct{}
	// cancelRequested: an operator cancels the task. answered, when not nil, is
	// handed to the agent's answer (cancelAnswer) if the task waits for one.
	cancelRequested struct {
		reason, by string
		answered   chan struct{}
	}
	// cancelAnswer: what the agent said to a cancel (err when it could not be
	// asked).
	cancelAnswer struct {
		ack *envelope.ControlAck
		err error
	}
	// agentLost: the agent of attempt went offline, or was revoked (Forget):
	// whether the work ran there cannot be known, so the task then fails.
	agentLost struct {
		agentID string
		attempt int
		why     string
		revoked bool
	}
	// agentReplaced: a new process of the agent of attempt heartbeats: the
	// request goes to it again.
	agentReplaced struct {
		agentID, version string
		attempt          int
	}
	// finalStored: the final write is committed (or failed): the end shows. A
	// task whose first write was its last and failed was never stored: Submit
	// refused it, and it is not counted.
	finalStored struct {
		ev      *task.Event
		uncount bool
	}
	// dropped: the task's first write failed; Submit refused it.
	dropped struct{}
)

func (submitted) isEvent()       {}
func (approvalDecided) isEvent() {}
func (approvalExpired) isEvent() {}
func (resumed) isEvent()         {}
func (routed) isEvent()          {}
func (stored) isEvent()          {}
func (sendFailed) isEvent()      {}
func (message) isEvent()         {}
func (noResponders) isEvent()    {}
func (silence) isEvent()         {}
func (deadlineDue) isEvent()     {}
func (retryDue) isEvent()        {}
func (queueWaitDue) isEvent()    {}
func (cancelRequested) isEvent() {}
func (cancelAnswer) isEvent()    {}
func (agentLost) isEvent()       {}
func (agentReplaced) isEvent()   {}
func (finalStored) isEvent()     {}
func (dropped) isEvent()         {}

// ---- Transitions ----

// apply applies ev to r and returns the effects, to be carried out in order. An
// ended task takes only the commit of its final write.
func (m *machine) apply(r *run, ev event) []effect {
	m.effs = nil
	if r.finished {
		if e, ok := ev.(finalStored); ok {
			m.emit(notify{e.ev}, forget{uncount: e.uncount})
		}
		return m.take()
	}
	switch e := ev.(type) {
	case submitted:
		r.fresh = true
		waits := r.t.Approval != nil && r.t.Approval.State == task.ApprovalWaiting
		if waits {
			r.t.State = task.StateAwaitingApproval
		}
		m.record(r, &task.Event{Type: task.EventState, Message: "submitted", By: e.by})
		if waits {
			m.awaitApproval(r)
			break
		}
		m.emit(route{})
	case approvalDecided:
		m.decide(r, e)
	case approvalExpired:
		m.expire(r)
	case resumed:
		m.resume(r)
	case routed:
		m.routed(r, e)
	case stored:
		m.stored(r, e)
	case sendFailed:
		if e.attempt == r.attempt {
			m.failAttempt(r, errcodes.NewAgentUnavailable("publish work_request: "+e.err.Error(), r.t.AgentID, nil), true)
		}
	case message:
		m.message(r, e)
	case noResponders:
		m.noResponders(r, e)
	case silence:
		if e.gen == r.gen {
			m.failAttempt(r, timeoutError(r, e.why), false)
		}
	case deadlineDue:
		m.deadline(r)
	case retryDue:
		if e.attempt == r.attempt {
			m.emit(route{})
		}
	case queueWaitDue:
		if r.queued {
			m.emit(route{unlessOnline: true})
		}
	case cancelRequested:
		m.cancel(r, e)
	case cancelAnswer:
		m.cancelAnswered(r, e)
	case agentLost:
		if m.inFlight(r, e.agentID, e.attempt) {
			err := timeoutError(r, e.why)
			if e.revoked {
				err = errcodes.New(errcodes.AuthenticationFailed, "%s", e.why)
			}
			m.failAttempt(r, err, false)
		}
	case agentReplaced:
		m.resend(r, e)
	case dropped:
		r.finished = true
		m.unqueue(r)
		m.emit(stopAll{})
		m.endAttempt(r, nil)
		m.emit(forget{uncount: true})
	}
	return m.take()
}

func (m *machine) emit(effs ...effect) { m.effs = append(m.effs, effs...) }

func (m *machine) take() []effect {
	effs := m.effs
	m.effs = nil
	return effs
}

// record numbers ev and keeps it for the task's next write.
func (m *machine) record(r *run, ev *task.Event) {
	m.stamp(r, ev)
	r.unwritten = append(r.unwritten, ev)
}

// stamp numbers the events of evs not numbered yet, with r's state now.
func (m *machine) stamp(r *run, evs ...*task.Event) {
	t := r.t
	t.UpdatedAt = m.now()
	for _, ev := range evs {
		if ev.Seq != 0 {
			continue
		}
		r.seq++
		ev.Seq, ev.At, ev.State = r.seq, t.UpdatedAt, t.State
	}
}

// write numbers evs and writes them after the unwritten ones, with the task's
// record when record is set.
func (m *machine) write(r *run, w write, evs ...*task.Event) {
	m.stamp(r, evs...)
	w.events = append(r.unwritten, evs...)
	r.unwritten = nil
	r.fresh = false
	m.emit(w)
}

// save writes ev with the task's record and sends it to the task's streams.
func (m *machine) save(r *run, ev *task.Event) {
	m.write(r, write{record: true}, ev)
	m.emit(notify{ev})
}
