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

package orchestrator

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/output"
)

// run is the live state of one unfinished task. The machine owns its first part;
// the loop keeps the second, which the machine never reads.
type run struct {
	t   *Task
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
	unwritten []*Event
	// fresh says no write of the task has been made: a failure of its first write
	// is Submit's to answer (it drops the task).
	fresh bool

	timers  [timerKinds]*time.Timer
	agent   *agentEntry     // where the attempt counts as load
	done    func(err error) // the breaker's outcome callback for this attempt
	written *commit         // the last write
}

// maxReasks bounds how often a result with missing output is asked for again.
const maxReasks = 2

// machine applies events to runs. Its settings are the orchestrator's; now and
// nonce are its only sources of time and randomness.
type machine struct {
	timeouts TimeoutConfig
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
		queue            bool
		why              string
		err              *errcodes.Error
		failFast         bool
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
	// message: a work_status, work_result or error from agentID, authenticated.
	message struct {
		agentID string
		env     *envelope.Envelope
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
	// agentLost: the agent of attempt went offline.
	agentLost struct {
		agentID string
		attempt int
		why     string
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
		ev      *Event
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

// ---- Effects ----

// effect is something the loop must do for the task, in order.
type effect interface{ isEffect() }

// timerKind names one of a run's timers.
type timerKind int

const (
	timerSilence  timerKind = iota // ack, then inactivity
	timerDeadline                  // hints.max_duration_seconds
	timerRetry                     // the wait before a retry
	timerQueue                     // a resumed task's wait for its agents
	timerApproval                  // the wait for an approval
	timerKinds
)

type (
	// write saves events (and the task's record, with record) in one commit;
	// then, when set, makes the event to apply once it is committed or failed.
	// replace makes its data the task's whole output before the write.
	write struct {
		record  bool
		events  []*Event
		piece   task.Piece
		replace *string
		then    func(err error) event
	}
	// publish sends the work_request of attempt to agentID, with the attempt's
	// reply subject.
	publish struct {
		attempt int
		agentID string
		env     *envelope.Envelope
	}
	// claim takes a slot on agentID for the attempt and asks its breaker.
	claim struct{ agentID string }
	// release gives the attempt's slot back and reports outcome to the breaker
	// (once: a settled attempt reports nothing more); drain then routes queued
	// tasks of the type into the slot.
	release struct {
		outcome error
		drain   bool
	}
	// settle reports outcome to the attempt's breaker, once.
	settle struct{ outcome error }
	// arm starts timer kind, replacing the one running; fire is applied when it
	// runs out.
	arm struct {
		kind  timerKind
		after time.Duration
		fire  event
	}
	// stop stops timer kind.
	stop struct{ kind timerKind }
	// stopAll stops every timer of the run.
	stopAll struct{}
	// notify sends ev to the task's live streams.
	notify struct{ ev *Event }
	// enqueue puts the task in its type's queue: at its head for a task
	// dispatched before, so that a retry does not wait behind newer tasks.
	enqueue struct{ head bool }
	// unqueue takes the task out of its type's queue.
	unqueue struct{}
	// route asks routing where the task goes; the answer is applied as routed.
	// unlessOnline asks only when no agent of the task's type is online: when one
	// is, the queue's drain routes the task in its turn.
	route struct{ unlessOnline bool }
	// drain routes the queued tasks of the task's type while agents have room.
	drain struct{}
	// cancelAgent tells agentID to cancel the task, in the background. With
	// answered set, the answer is applied as cancelAnswer, then answered closed.
	cancelAgent struct {
		agentID, reason string
		answered        chan struct{}
	}
	// unreachable marks agentID unreachable until it registers or heartbeats.
	unreachable struct{ agentID string }
	// forged counts a "no responders" that did not come on the attempt's subject.
	forged struct{}
	// acknowledged counts the time from dispatch to the first status.
	acknowledged struct{ after time.Duration }
	// retried counts a retry for code.
	retried struct{ code int }
	// rejected counts an output piece refused.
	rejected struct{}
	// asked tells the webhook receivers the task waits for approval.
	asked struct{}
	// forget removes the ended task from the live ones and ends its streams;
	// uncount takes it out of the tasks-by-state gauge (it was never stored).
	forget struct{ uncount bool }
)

func (write) isEffect()        {}
func (publish) isEffect()      {}
func (claim) isEffect()        {}
func (release) isEffect()      {}
func (settle) isEffect()       {}
func (arm) isEffect()          {}
func (stop) isEffect()         {}
func (stopAll) isEffect()      {}
func (notify) isEffect()       {}
func (enqueue) isEffect()      {}
func (unqueue) isEffect()      {}
func (route) isEffect()        {}
func (drain) isEffect()        {}
func (cancelAgent) isEffect()  {}
func (unreachable) isEffect()  {}
func (forged) isEffect()       {}
func (acknowledged) isEffect() {}
func (retried) isEffect()      {}
func (rejected) isEffect()     {}
func (forget) isEffect()       {}
func (asked) isEffect()        {}

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
		waits := r.t.Approval != nil && r.t.Approval.State == ApprovalWaiting
		if waits {
			r.t.State = StateAwaitingApproval
		}
		m.record(r, &Event{Type: EventState, Message: "submitted", By: e.by})
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
			m.failAttempt(r, timeoutError(r, e.why), false)
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
func (m *machine) record(r *run, ev *Event) {
	m.stamp(r, ev)
	r.unwritten = append(r.unwritten, ev)
}

// stamp numbers the events of evs not numbered yet, with r's state now.
func (m *machine) stamp(r *run, evs ...*Event) {
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
func (m *machine) write(r *run, w write, evs ...*Event) {
	m.stamp(r, evs...)
	w.events = append(r.unwritten, evs...)
	r.unwritten = nil
	r.fresh = false
	m.emit(w)
}

// save writes ev with the task's record and sends it to the task's streams.
func (m *machine) save(r *run, ev *Event) {
	m.write(r, write{record: true}, ev)
	m.emit(notify{ev})
}

// routed acts on a routing decision.
func (m *machine) routed(r *run, e routed) {
	m.unqueue(r)
	switch {
	case e.agentID != "":
		m.dispatch(r, e.agentID, e.version)
	case e.queue:
		m.enqueue(r, e.why)
	case e.failFast:
		m.finishError(r, e.err)
	default:
		m.failAttempt(r, e.err, true)
	}
}

// dispatch sends the task to agentID. The task is stored as dispatched there first,
// and the work_request goes out once that write is committed (stored): after a
// crash, the store names every agent that may have the request. The ack timer
// starts with the send.
func (m *machine) dispatch(r *run, agentID, version string) {
	t := r.t
	now := m.now()
	r.attempt++
	r.accepted, r.sentAt, r.nonce = false, now, m.nonce()
	t.Attempts++
	t.AgentID = agentID
	t.LastAttemptAt = &now
	if t.FirstDispatchAt == nil {
		t.FirstDispatchAt = &now
	}
	t.State = StateDispatched
	m.emit(claim{agentID})
	ev := &Event{Type: EventState, Message: fmt.Sprintf("dispatched to %s (attempt %d)", agentID, t.Attempts)}
	then := stored{attempt: r.attempt, agentID: agentID, version: version, first: r.fresh}
	m.write(r, write{record: true, then: func(err error) event { then.err = err; return then }}, ev)
	m.emit(notify{ev})
	if max := maxDuration(t); max > 0 && !r.deadlineArmed {
		// The ack and inactivity timers run under a deadline too: a long task is
		// not a silent one (agents send keepalive statuses), and a dead agent's task
		// must not wait for its deadline.
		r.deadlineArmed = true
		end := t.FirstDispatchAt.Add(max + m.timeouts.DeadlineGrace)
		m.emit(arm{timerDeadline, end.Sub(now), deadlineDue{}})
	}
}

// armSilence (re)starts the silence timer: the attempt fails with 5001 when no
// message comes within d.
func (m *machine) armSilence(r *run, d time.Duration, why string) {
	r.gen++
	m.emit(arm{timerSilence, d, silence{gen: r.gen, why: why}})
}

// stored publishes the work_request of a dispatch once it is stored, unless the
// attempt has ended meanwhile. A new task whose first write failed is Submit's to
// drop.
func (m *machine) stored(r *run, e stored) {
	if e.first && e.err != nil || e.attempt != r.attempt {
		return
	}
	t := r.t
	if e.err != nil {
		m.failAttempt(r, errcodes.NewAgentUnavailable("store dispatched task: "+e.err.Error(), e.agentID, nil), true)
		return
	}
	env := envelope.New(envelope.Orchestrator, t.ToAgent, t.RequestID, t.TraceID,
		&envelope.WorkRequest{TaskID: t.ID, WorkType: t.WorkType, Parameters: t.Parameters, Hints: hintsEnvelope(t.Hints)})
	env.ProtocolVersion = envelope.ProtocolVersion
	if e.version != "" {
		env.ProtocolVersion = e.version
	}
	m.emit(publish{attempt: e.attempt, agentID: e.agentID, env: env})
	// The agent's time to answer runs from the send: a slow store is not a silent
	// agent, and must not count against its breaker.
	ack := m.timeouts.Ack
	m.armSilence(r, ack, fmt.Sprintf("no acknowledgement within %s", ack))
}

// message applies a message from the task's agent; one from another agent or for
// another request is dropped.
func (m *machine) message(r *run, e message) {
	t := r.t
	if e.agentID != t.AgentID || e.env.RequestID != t.RequestID {
		r.log.Warn("message from another agent or request dropped", "agent_id", e.agentID, "msg_request_id", e.env.RequestID)
		return
	}
	switch p := e.env.Payload.(type) {
	case *envelope.WorkStatus:
		if p.TaskID == t.ID {
			m.status(r, e.env, p)
			return
		}
	case *envelope.WorkResult:
		if p.TaskID == t.ID {
			m.result(r, e.env, p)
			return
		}
	case *envelope.ErrorPayload:
		// Before the first status it means the request never started.
		m.failAttempt(r, p.Err(), !r.accepted)
		return
	}
	r.log.Warn("unexpected message on task inbox dropped", "type", e.env.Type)
}

// status records a work_status: the attempt is acknowledged, its inactivity timer
// restarts, and the status is written with its output piece, but not the task's
// record. A status changes the task's steps, progress and output, which the record
// gets at its next write and recover rebuilds from the status events after a crash,
// and moves it from dispatched to running, which recover treats alike: either may
// have reached the agent.
func (m *machine) status(r *run, env *envelope.Envelope, st *envelope.WorkStatus) {
	t := r.t
	if !r.accepted {
		r.accepted = true
		m.emit(acknowledged{m.now().Sub(r.sentAt)})
	}
	t.State = StateRunning
	idle := m.timeouts.Inactivity
	m.armSilence(r, idle, fmt.Sprintf("no message for %s", idle))
	var off *int64
	var pieces []task.Piece
	var kept string // the output the event carries
	p, ok, err := r.out.Place(env.XCustomFields, st)
	if err != nil {
		m.emit(rejected{})
		r.log.Warn("output piece rejected", "step", st.Step.Number, "err", err)
	} else if ok {
		off, kept = &p.Offset, p.Data
		for _, s := range p.New {
			pieces = append(pieces, task.Piece{Offset: s.Start, Data: p.Piece(s)})
		}
		t.OutputBytes = r.out.Contiguous()
	}
	if kept != st.Step.Output {
		// Neither a rejected piece nor bytes past the cap are stored (an event
		// without an offset would keep them) or streamed.
		c := *st
		c.Step.Output = kept
		st = &c
	}
	capped := m.capOutput(r, p.Cut)
	ev := &Event{Type: EventStatus, Status: st, OutputOffset: off}
	first := task.Piece{}
	if len(pieces) > 0 {
		first, pieces = pieces[0], pieces[1:]
	}
	m.write(r, write{piece: first}, ev)
	for _, piece := range pieces { // more gaps that the piece fills
		m.emit(write{piece: piece})
	}
	// As replayStatuses applies the stored event after a restart.
	t.ProgressPercent = st.ProgressPercent
	updateStep(t, st, ev.At)
	if capped != nil {
		m.emit(notify{capped})
	}
	m.emit(notify{ev})
}

// capOutput marks the task's output capped when cut says bytes past
// max_output_bytes were dropped, the first time, and records why in its history:
// it returns that event, or nil.
func (m *machine) capOutput(r *run, cut bool) *Event {
	t := r.t
	if !cut || t.OutputCapped {
		return nil
	}
	t.OutputCapped, t.OutputComplete = true, false
	r.log.Warn("output over max_output_bytes: the rest is dropped", "agent_id", t.AgentID, "max_output_bytes", r.out.Limit)
	ev := &Event{Type: EventState, Message: fmt.Sprintf("output over max_output_bytes (%d bytes): the rest is dropped", r.out.Limit)}
	m.record(r, ev)
	return ev
}

// capResult cuts the output res carries, bytes [total-len, total) of the whole
// output, at the run's max_output_bytes, and returns res or a copy so cut.
func (m *machine) capResult(r *run, res *envelope.WorkResult, total int64) *envelope.WorkResult {
	limit := r.out.Limit
	if limit <= 0 || total <= limit {
		return res
	}
	c := *res
	c.Output, _ = output.Cut(res.Output, total-int64(len(res.Output)), limit)
	m.capOutput(r, true)
	return &c
}

// result applies the result rule: a result that is not truncated holds the whole
// output; a truncated one needs the streamed output whole, or the request is sent
// again so that the agent's cache replays it.
func (m *machine) result(r *run, env *envelope.Envelope, res *envelope.WorkResult) {
	t := r.t
	r.accepted = true
	truncated, total := output.Truncation(env.XCustomFields, res)
	res = m.capResult(r, res, total)
	var replace *string
	if !truncated {
		// r.out holds what the store holds (recover rebuilds it): with no output
		// either side there is nothing to replace.
		if res.Output != "" || !r.out.Empty() {
			replace = &res.Output
		}
		r.out.Replace(int64(len(res.Output)))
		t.OutputBytes, t.OutputComplete = int64(len(res.Output)), !t.OutputCapped
	} else {
		// A capped output is never whole: asking for it again would not help.
		t.OutputComplete = !t.OutputCapped && r.out.Complete(total)
		t.OutputBytes = r.out.Contiguous()
		if !t.OutputComplete && !t.OutputCapped && r.reasks < maxReasks && !t.CancelRequested {
			r.reasks++
			r.log.Warn("truncated result with a gap in the output: asking the agent again",
				"have", t.OutputBytes, "total", total, "reask", r.reasks)
			m.endAttempt(r, nil)
			m.save(r, &Event{Type: EventState, Message: fmt.Sprintf("output incomplete (%d of %d bytes): asking again", t.OutputBytes, total)})
			r.pinned, r.stick = t.AgentID, t.AgentID // it ran the request: only its cache has the output
			r.out.Restart()
			m.emit(route{})
			return
		}
		if !t.OutputComplete && !t.OutputCapped {
			r.log.Error("output incomplete after asking again", "have", t.OutputBytes, "total", total)
		}
	}
	structured, err := output.Structured(env.XCustomFields)
	if err != nil {
		r.log.Warn("structured output dropped", "err", err)
	}
	t.Result = &Result{Status: res.Status, ExitCode: res.ExitCode, ResourcesUsed: res.ResourcesUsed,
		OutputTruncated: truncated, OutputTotalBytes: total, StructuredOutput: structured, At: m.now()}
	if res.Status == envelope.ResultSuccess {
		t.ProgressPercent = 100
	}
	state := map[string]State{envelope.ResultSuccess: StateSucceeded, envelope.ResultFailed: StateFailed,
		envelope.ResultCancelled: StateCancelled}[res.Status]
	m.finish(r, state, &Event{Type: EventResult, Result: res, StructuredOutput: structured}, "", replace)
}

// noResponders ends an attempt nobody received: it never started, so it counts
// neither against the agent's breaker nor, unless the task is pinned, against its
// retries. The agent is unreachable until it registers or heartbeats again; the task
// goes back to its queue. A pinned task may go nowhere else, so it is retried on its
// agent as before. Only the status on the current attempt's reply subject counts,
// which nobody but the agent it went to has seen.
func (m *machine) noResponders(r *run, e noResponders) {
	t := r.t
	if r.accepted || t.State != StateDispatched {
		return
	}
	if e.nonce != r.nonce || e.agentID != t.AgentID {
		m.emit(forged{})
		return
	}
	m.emit(unreachable{t.AgentID}, settle{errNeverReached})
	err := errcodes.NewAgentUnavailable("no agent listens on the work subject (no responders)", t.AgentID, e.lastHB)
	if r.pinned != "" {
		m.failAttempt(r, err, true)
		return
	}
	r.log.Warn("attempt reached no agent: queued again", "agent_id", t.AgentID, "attempt", t.Attempts, "err", err.Message)
	if !m.closeAttempt(r, errNeverReached) {
		return
	}
	r.stick, r.avoid = "", t.AgentID
	t.State = StatePending
	m.save(r, &Event{Type: EventState, Error: taskError(err), Message: fmt.Sprintf("%s did not receive it (no responders): queued again", t.AgentID)})
	m.enqueue(r, "")
	m.emit(drain{})
}

// deadline ends a task that outlived hints.max_duration_seconds, and tells the
// agent to stop it.
func (m *machine) deadline(r *run) {
	t := r.t
	e := timeoutError(r, fmt.Sprintf("task exceeded max_duration_seconds=%d", t.Hints.MaxDurationSeconds))
	switch {
	case t.AgentID != "" && (t.State == StateDispatched || t.State == StateRunning):
		m.emit(cancelAgent{agentID: t.AgentID, reason: "max_duration_seconds exceeded"})
	case r.pinned != "":
		// Between attempts: the pinned agent may still run an earlier one.
		m.emit(cancelAgent{agentID: r.pinned, reason: "max_duration_seconds exceeded"})
	}
	m.finishError(r, e)
}

// inFlight reports whether attempt of r went to agentID and has not ended.
func (m *machine) inFlight(r *run, agentID string, attempt int) bool {
	t := r.t
	return r.attempt == attempt && t.AgentID == agentID && (t.State == StateDispatched || t.State == StateRunning)
}

// resend sends a task that was in flight on a process its agent's new process
// replaced to the new one, with its request_id: the new process's dedupe cache
// answers (a task that was running there ends "interrupted"). The re-send spends no
// retry and does not count against the breaker.
func (m *machine) resend(r *run, e agentReplaced) {
	if !m.inFlight(r, e.agentID, e.attempt) {
		return // the attempt ended, or another one went out, since the registration
	}
	// End the old attempt without draining the queue into its slot.
	r.gen++
	m.emit(stop{timerSilence}, release{outcome: errNeverReached})
	r.pinned, r.stick = e.agentID, e.agentID // only this agent's cache knows whether it ran
	r.log.Info("agent process replaced: task sent again", "agent_id", e.agentID, "attempt", r.t.Attempts)
	m.save(r, &Event{Type: EventState, Message: e.agentID + " restarted: sent again"})
	m.dispatch(r, e.agentID, e.version)
}

// resume takes up a task found unfinished in the store. One that reached an agent is
// sent again to that agent with its request_id, whose cache answers; one that did
// not is queued until the agents register.
func (m *machine) resume(r *run) {
	t := r.t
	if t.CancelRequested && (t.State == StatePending || t.State == StateAwaitingApproval) {
		m.finish(r, StateCancelled, nil, "cancelled", nil)
		return
	}
	if t.State == StateAwaitingApproval {
		m.save(r, &Event{Type: EventState, Message: "resumed after orchestrator restart: still awaiting approval"})
		m.emit(arm{timerApproval, max(t.Approval.ExpiresAt.Sub(m.now()), 0), approvalExpired{}})
		return
	}
	m.save(r, &Event{Type: EventState, Message: "resumed after orchestrator restart"})
	if t.AgentID != "" {
		r.log.Info("resuming task on its agent", "agent_id", t.AgentID, "state", t.State)
		r.stick = t.AgentID
		if mayHaveStarted(t) {
			r.pinned = t.AgentID
		}
		m.emit(route{})
		return
	}
	// Never dispatched: it waits in its type's queue, which the agents'
	// registrations drain. Routing it before they have registered would cost it a
	// retry (5002 "no online agent") for no fault of theirs. When it is still queued
	// after the ack timeout, it is routed as a new task would be.
	r.log.Info("resuming task: queued until its agents register", "state", t.State)
	m.enqueue(r, "")
	m.emit(arm{timerQueue, m.timeouts.Ack, queueWaitDue{}})
}

// cancel applies an operator's cancel. A task not sent yet ends cancelled at once,
// and so does one waiting for a retry, whose pinned agent, which may still run an
// earlier attempt, is told to cancel it. A running task's agent is told to cancel
// it; the task ends cancelled with the agent's result, or at once when the agent
// says it is not running it or cannot be reached (cancelAnswered).
func (m *machine) cancel(r *run, e cancelRequested) {
	t := r.t
	if t.CancelRequested {
		return
	}
	t.CancelRequested = true
	r.cancelWhy = e.reason
	reason := cancelReason(e.reason)
	ended := func(msg string) *Event {
		return &Event{Type: EventState, Message: because(e.reason, msg), By: e.by}
	}
	if t.State == StatePending || t.State == StateAwaitingApproval {
		if r.pinned != "" {
			r.log.Info("task cancelled between attempts", "agent_id", r.pinned)
			m.emit(cancelAgent{agentID: r.pinned, reason: reason})
			m.finish(r, StateCancelled, ended("cancelled between attempts"), "", nil)
			return
		}
		r.log.Info("task cancelled before dispatch")
		m.finish(r, StateCancelled, ended("cancelled before dispatch"), "", nil)
		return
	}
	m.save(r, ended("cancel requested"))
	m.emit(cancelAgent{agentID: t.AgentID, reason: reason, answered: e.answered})
}

// cancelAnswered ends a task whose agent would not or could not cancel it.
func (m *machine) cancelAnswered(r *run, e cancelAnswer) {
	if e.err == nil && e.ack != nil && e.ack.OK {
		return // it ends with the agent's result
	}
	why := "agent was not running it"
	if e.err != nil {
		why = "agent unreachable: " + e.err.Error()
	} else if e.ack != nil && e.ack.Message != "" {
		why = "agent: " + e.ack.Message
	}
	r.log.Info("task cancelled", "why", why)
	m.finish(r, StateCancelled, nil, because(r.cancelWhy, "cancelled")+"; "+why, nil)
}

// because is msg, followed by the operator's reason when one was given.
func because(reason, msg string) string {
	if reason == "" {
		return msg
	}
	return msg + ": " + reason
}

// endAttempt ends the current attempt: its silence timer stops, its slot is freed
// for queued tasks and its breaker learns outcome.
func (m *machine) endAttempt(r *run, outcome error) {
	r.gen++
	m.emit(stop{timerSilence}, release{outcome: outcome, drain: true})
}

// closeAttempt ends the attempt with outcome and reports whether the task goes on:
// not when a cancel waited for the attempt to end (it then ends cancelled).
func (m *machine) closeAttempt(r *run, outcome error) bool {
	m.endAttempt(r, outcome)
	if r.t.CancelRequested {
		m.finish(r, StateCancelled, nil, "cancelled", nil)
		return false
	}
	return true
}

// failAttempt applies the retry policy (retry.go) to a failed attempt: retryable
// codes are retried after the next backoff wait, the rest end the task.
// neverStarted says the agent provably did not run it, so the retry may go to
// another agent.
func (m *machine) failAttempt(r *run, e *errcodes.Error, neverStarted bool) {
	t := r.t
	r.log.Warn("attempt failed", "agent_id", t.AgentID, "attempt", t.Attempts, "code", int(e.Code), "err", e.Message, "never_started", neverStarted)
	if !m.closeAttempt(r, e) {
		return
	}
	if !e.Retryable() {
		m.finishError(r, e)
		return
	}
	wait := r.bo.NextBackOff()
	if wait == backoff.Stop {
		r.log.Warn("retries exhausted", "retries", len(t.Retries))
		m.finishError(r, e)
		return
	}
	t.Retries = append(t.Retries, Retry{Attempt: t.Attempts, Code: int(e.Code), Message: e.Message,
		AgentID: t.AgentID, WaitMS: wait.Milliseconds(), At: m.now()})
	m.emit(retried{int(e.Code)})
	r.nextAgent(neverStarted)
	t.State = StatePending
	m.save(r, &Event{Type: EventRetry, Error: taskError(e), Message: fmt.Sprintf("retry %d in %s", len(t.Retries), wait)})
	m.emit(arm{timerRetry, wait, retryDue{r.attempt}})
}

// finishError ends r in StateError with e.
func (m *machine) finishError(r *run, e *errcodes.Error) {
	r.t.Error = taskError(e)
	m.finish(r, StateError, nil, e.Error(), nil)
}

// finish ends r: its timers stop, its slot is freed, and the final task is written
// (after its whole output, with replace); the end shows to readers and streams once
// that write is committed (finalStored).
func (m *machine) finish(r *run, state State, ev *Event, msg string, replace *string) {
	t := r.t
	r.finished = true
	m.emit(stopAll{})
	m.unqueue(r)
	m.endAttempt(r, nil)
	now := m.now()
	t.FinishedAt = &now
	if state != StateError {
		// A task's error is why it ended in StateError; an attempt's is in Retries.
		t.Error = nil
	}
	endSteps(t, state, now)
	t.State = state
	if ev == nil {
		ev = &Event{Type: EventState, Message: msg}
	}
	if t.Error != nil && ev.Error == nil && state == StateError {
		ev.Type, ev.Error = EventError, t.Error
	}
	first := r.fresh
	m.write(r, write{record: true, replace: replace, then: func(err error) event {
		return finalStored{ev: ev, uncount: first && err != nil}
	}}, ev)
	r.log.Info("task finished", "state", state, "attempts", t.Attempts, "agent_id", t.AgentID)
}

// enqueue puts r in its type's queue, writing what is unwritten (a new task), and
// why it waits when a limit holds it back (its history says so).
func (m *machine) enqueue(r *run, why string) {
	if r.queued {
		return
	}
	r.queued = true
	m.emit(enqueue{head: r.t.Attempts > 0})
	if why != "" {
		m.record(r, &Event{Type: EventState, Message: "queued: " + why})
	}
	if len(r.unwritten) > 0 {
		m.write(r, write{record: true})
	}
	if why == "" {
		r.log.Info("task queued: no candidate agent can take it now", "agent_type", r.t.ToAgent)
	}
}

func (m *machine) unqueue(r *run) {
	if r.queued {
		r.queued = false
		m.emit(unqueue{})
	}
}

func updateStep(t *Task, st *envelope.WorkStatus, now time.Time) {
	for i := range t.Steps {
		if t.Steps[i].Number == st.Step.Number {
			t.Steps[i].Name, t.Steps[i].Status, t.Steps[i].UpdatedAt = st.Step.Name, st.Status, now
			return
		}
	}
	t.Steps = append(t.Steps, StepInfo{Number: st.Step.Number, Name: st.Step.Name, Status: st.Status, UpdatedAt: now})
}

// endSteps ends the steps a finished task leaves open (its agent ends the last one
// with the work_result, and an agent may not end any): step_completed when the task
// succeeded, else the task's final state, "failed", "cancelled" or "error".
func endSteps(t *Task, state State, now time.Time) {
	end := string(state)
	if state == StateSucceeded {
		end = envelope.StatusStepCompleted
	}
	for i := range t.Steps {
		if s := &t.Steps[i]; s.Status != envelope.StatusStepCompleted {
			s.Status, s.UpdatedAt = end, now
		}
	}
}

func taskError(e *errcodes.Error) *TaskError {
	return &TaskError{Code: int(e.Code), Message: e.Message, Context: e.Context}
}
