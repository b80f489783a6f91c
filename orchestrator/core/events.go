package core

import "github.com/chiffon-dev/chiffon/orchestrator/task"

// The core's event stream. Everything outside the task lifecycle that follows
// it (the task streams of SSE and Wait, the webhook receivers, the batch
// runners) reads one ordered stream of Events instead of being called from the
// effects: the loop hands each reader every event, in the order it made them.

// EventKind says what an Event tells.
type EventKind uint8

// The kinds of Event.
const (
	// TaskStep is a task's new event (Event), as its SSE stream carries it.
	TaskStep EventKind = iota + 1
	// TaskAwaitsApproval is a task made to wait for an operator's yes (Task).
	TaskAwaitsApproval
	// TaskEnded is a task's end, stored (Task).
	TaskEnded
	// TaskDropped is a task that left without being stored: a submit whose
	// first write failed. Nothing more comes of it.
	TaskDropped
	// AgentOnline is an agent that came online (AgentID): a new registration's
	// first heartbeat, or one offline back. A batch waiting for it to register
	// may give it its task.
	AgentOnline
	// Stopped is the last event: the core stopped (Close, or the lead lost),
	// and every task still live is dropped from memory, not ended.
	Stopped
)

// Event is one thing the core did that its readers follow.
type Event struct {
	Kind   EventKind
	TaskID string
	// AgentID is AgentOnline's agent.
	AgentID string
	// Event is TaskStep's task event.
	Event *task.Event
	// Task is the task for TaskAwaitsApproval and TaskEnded, as the core
	// holds it: read it during the call, never change it, and keep a Clone.
	Task *task.Task
}

// Subscribe makes fn a reader of the core's events, from the next one on, and
// returns the function that stops it. fn runs on the core's loop, one event at
// a time in the order they happened: it must return at once (hand the event
// on, never wait) and must not call the core.
func (o *Core) Subscribe(fn func(Event)) (unsubscribe func()) {
	r := &reader{fn: fn}
	if o.call(func() { o.readers = append(o.readers, r) }) != nil {
		return func() {}
	}
	return func() {
		_ = o.call(func() {
			for i, x := range o.readers {
				if x == r {
					o.readers = append(o.readers[:i], o.readers[i+1:]...)
					return
				}
			}
		})
	}
}

// reader is one Subscribe.
type reader struct{ fn func(Event) }

// emit hands ev to every reader.
func (o *Core) emit(ev Event) {
	for _, r := range o.readers {
		r.fn(ev)
	}
}
