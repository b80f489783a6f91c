package task

import "time"

// Origin is what made a task, and what it fixes of the task: a plain submission
// sets By alone; a batch or a schedule (package orchestrator/fleet) sets ID and
// RequestID too, derived from what made it (the batch and the agent, the
// schedule and the fire time), so that making it again, after a restart or in
// another orchestrator, finds the task instead of running the work twice.
type Origin struct {
	// ID and RequestID are the task's; "" makes new ones.
	ID, RequestID string
	// BatchID is the batch the task is part of, or "".
	BatchID string
	// Schedule names the schedule that fired it, at FireTime; "" and nil when
	// no schedule did.
	Schedule string
	FireTime *time.Time
	// By names who made it: the caller's API token, or the schedule.
	By string
	// WorkflowRun is the workflow run whose step made the task (or its
	// batch), or "".
	WorkflowRun string
	// Approval, when set, is the approval the task was made with (its batch's).
	Approval *Approval
}
