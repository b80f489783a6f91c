// The machine's effects: what the loop must do for a task (see Orchestrator.do),
// and the run's timers.

package core

import (
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

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
		events  []*task.Event
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
	notify struct{ ev *task.Event }
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
