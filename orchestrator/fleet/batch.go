package fleet

import (
	"slices"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// The batch machine. A batch's runner (batchrun.go) reads the
// batch's record and its tasks; DecideBatch says, from them and the clock alone,
// what the batch is now and what the runner does next, as effects the runner
// carries out. Nothing here reads or writes, so batch_test.go can hold a row for
// every state a batch can be in and every event its runner can see, as
// orchestrator's machine_test.go does for a task.

// Retry is how long a batch's runner, or the schedules' clock, waits after the
// store or a submit failed before it tries again; a batch in a pair no row
// expects is looked at again after it too.
const Retry = time.Second

// batchEvent is what the runner sees when it looks at a batch.
type batchEvent string

// Batch events.
const (
	// batchApprovalOpen: the batch awaits an operator's answer, with time left.
	batchApprovalOpen batchEvent = "approval open"
	// batchApprovalExpired: nobody answered before the approval expired.
	batchApprovalExpired batchEvent = "approval expired"
	// batchRoom: a target waits for its task and max_parallel leaves room.
	batchRoom batchEvent = "room"
	// batchBusy: tasks run and no more may start now.
	batchBusy batchEvent = "busy"
	// batchDone: every target is done with: its task ended, or it gets none.
	batchDone batchEvent = "done"
	// batchAgentCame: the agent of a registering target registered (or the
	// core knows it otherwise now).
	batchAgentCame batchEvent = "agent came"
	// batchGraceOver: targets are registering and the batch's register grace
	// is over.
	batchGraceOver batchEvent = "grace over"
)

// batchEvents lists every batch event.
var batchEvents = []batchEvent{batchApprovalOpen, batchApprovalExpired, batchRoom, batchBusy, batchDone,
	batchAgentCame, batchGraceOver}

// batchStates lists every state a batch's record can be in when its runner
// looks; awaiting_approval is a running record whose approval waits.
var batchStates = []api.BatchState{api.BatchAwaitingApproval, api.BatchRunning, api.BatchSucceeded,
	api.BatchFailed, api.BatchRejected}

// BatchEffectKind is what a batch effect asks of the runner.
type BatchEffectKind int

// Batch effect kinds.
const (
	// BatchMakeTask makes the task of target AgentID (its id derived from the
	// batch and the agent, so making it again finds it).
	BatchMakeTask BatchEffectKind = iota
	// BatchStoreEnd stores the view as the batch's end and tells the webhook
	// receivers.
	BatchStoreEnd
	// BatchWait looks again after After, or when one of the batch's tasks
	// ends; After 0 waits for a task alone.
	BatchWait
	// BatchStop ends the runner: the batch's end is stored.
	BatchStop
	// BatchStoreTargets stores the view's targets as the batch's: registering
	// ones were settled.
	BatchStoreTargets
)

// BatchEffect is one thing the runner does, in order.
type BatchEffect struct {
	Kind    BatchEffectKind
	AgentID string        // BatchMakeTask: the target whose task to make
	After   time.Duration // BatchWait: the longest wait; 0 waits for a task alone
}

// batchRow is one row of the machine: from a batch's view as seen, the effects.
// It may change the view (a rejection, skipped targets, registering targets
// settled); agents is DecideBatch's.
type batchRow func(view *api.Batch, agents map[string]string, now time.Time) []BatchEffect

// batchKey names a row.
type batchKey struct {
	state api.BatchState
	event batchEvent
}

// batchRows is the machine: one row for each state and event. A final record's
// runner only stops, whatever it sees; a pair observeBatch never gives (its state
// decides which events it can see) looks again later rather than guess.
var batchRows = map[batchKey]batchRow{
	{api.BatchAwaitingApproval, batchApprovalOpen}:    awaitApproval,
	{api.BatchAwaitingApproval, batchApprovalExpired}: expireApproval,
	{api.BatchAwaitingApproval, batchRoom}:            lookLater,
	{api.BatchAwaitingApproval, batchBusy}:            lookLater,
	{api.BatchAwaitingApproval, batchDone}:            lookLater,
	{api.BatchAwaitingApproval, batchAgentCame}:       lookLater,
	{api.BatchAwaitingApproval, batchGraceOver}:       lookLater,

	{api.BatchRunning, batchApprovalOpen}:    lookLater,
	{api.BatchRunning, batchApprovalExpired}: lookLater,
	{api.BatchRunning, batchRoom}:            startTasks,
	{api.BatchRunning, batchBusy}:            waitForATask,
	{api.BatchRunning, batchDone}:            endBatch,
	{api.BatchRunning, batchAgentCame}:       admitAgents,
	{api.BatchRunning, batchGraceOver}:       giveUpOnAgents,

	{api.BatchSucceeded, batchApprovalOpen}:    stopBatch,
	{api.BatchSucceeded, batchApprovalExpired}: stopBatch,
	{api.BatchSucceeded, batchRoom}:            stopBatch,
	{api.BatchSucceeded, batchBusy}:            stopBatch,
	{api.BatchSucceeded, batchDone}:            stopBatch,
	{api.BatchSucceeded, batchAgentCame}:       stopBatch,
	{api.BatchSucceeded, batchGraceOver}:       stopBatch,

	{api.BatchFailed, batchApprovalOpen}:    stopBatch,
	{api.BatchFailed, batchApprovalExpired}: stopBatch,
	{api.BatchFailed, batchRoom}:            stopBatch,
	{api.BatchFailed, batchBusy}:            stopBatch,
	{api.BatchFailed, batchDone}:            stopBatch,
	{api.BatchFailed, batchAgentCame}:       stopBatch,
	{api.BatchFailed, batchGraceOver}:       stopBatch,

	{api.BatchRejected, batchApprovalOpen}:    stopBatch,
	{api.BatchRejected, batchApprovalExpired}: stopBatch,
	{api.BatchRejected, batchRoom}:            stopBatch,
	{api.BatchRejected, batchBusy}:            stopBatch,
	{api.BatchRejected, batchDone}:            stopBatch,
	{api.BatchRejected, batchAgentCame}:       stopBatch,
	{api.BatchRejected, batchGraceOver}:       stopBatch,
}

// DecideBatch returns b's view at now, given its tasks by id (a task not made
// yet is absent) and what the core says now of its registering targets' agents
// (agents, by id: "" for one that gets a task, else the target's state, as
// Core.BatchTargets gives them; absent: not asked), and what b's runner does
// next. b itself is not changed.
func DecideBatch(b *api.Batch, tasks map[string]*task.Task, agents map[string]string, now time.Time) (api.Batch, []BatchEffect) {
	state := b.State
	if a := b.Approval; a != nil && a.State == task.ApprovalWaiting && state == api.BatchRunning {
		state = api.BatchAwaitingApproval
	}
	view := *b
	view.Targets = slices.Clone(b.Targets)
	ViewBatch(&view, tasks)
	row, ok := batchRows[batchKey{state, observeBatch(&view, agents, now)}]
	if !ok { // a state no row knows: a record from a later release
		return view, lookLater(&view, agents, now)
	}
	return view, row(&view, agents, now)
}

// observeBatch is the event a view shows, given DecideBatch's agents.
func observeBatch(view *api.Batch, agents map[string]string, now time.Time) batchEvent {
	switch {
	case view.State == api.BatchAwaitingApproval && now.Before(view.Approval.ExpiresAt):
		return batchApprovalOpen
	case view.State == api.BatchAwaitingApproval:
		return batchApprovalExpired
	case view.State.Final():
		return batchDone
	}
	registering := false
	for _, t := range view.Targets {
		if t.State != api.TargetRegistering {
			continue
		}
		if s, ok := agents[t.AgentID]; ok && s != api.TargetRegistering {
			return batchAgentCame
		}
		registering = true
	}
	if registering && (view.RegisterUntil == nil || !now.Before(*view.RegisterUntil)) {
		return batchGraceOver
	}
	running := 0
	for _, t := range view.Targets {
		if t.Started() && !t.Final() {
			running++
		}
	}
	for _, t := range view.Targets {
		if t.State == api.TargetWaiting && (view.MaxParallel == 0 || running < view.MaxParallel) {
			return batchRoom
		}
	}
	return batchBusy
}

// ViewBatch brings a running batch's targets to their tasks' states (tasks by
// id; absent: not made yet) and sets its state and counts: awaiting_approval
// while its approval waits, succeeded or failed once every target is done with.
// A stored finished batch holds its final view already.
func ViewBatch(b *api.Batch, tasks map[string]*task.Task) {
	if b.State != api.BatchRunning {
		return
	}
	if a := b.Approval; a != nil && a.State == task.ApprovalWaiting {
		b.State = api.BatchAwaitingApproval
		b.Count()
		return
	}
	failed := false
	for i := range b.Targets {
		t := &b.Targets[i]
		if t.TaskID == "" {
			continue
		}
		tk := tasks[t.TaskID]
		if tk == nil { // not made yet
			t.State, t.ProgressPercent = api.TargetWaiting, 0
			continue
		}
		t.State, t.ProgressPercent = string(tk.State), tk.ProgressPercent
		failed = failed || tk.State.Final() && tk.State != task.StateSucceeded
	}
	if failed && b.StopOnFailure || b.StopAsked != nil {
		for i := range b.Targets {
			if t := &b.Targets[i]; t.State == api.TargetWaiting || t.State == api.TargetRegistering {
				t.State = api.TargetSkipped
			}
		}
	}
	settle(b)
}

// settle counts b's targets and, once every one is done with, ends b
// succeeded or failed.
func settle(b *api.Batch) {
	b.Count()
	done, ok := true, true
	for _, t := range b.Targets {
		done = done && t.Final()
		ok = ok && t.State == string(task.StateSucceeded)
	}
	if done {
		b.State = api.BatchFailed
		if ok {
			b.State = api.BatchSucceeded
		}
	}
}

// awaitApproval waits for the operator's answer, at most until it expires.
func awaitApproval(view *api.Batch, _ map[string]string, now time.Time) []BatchEffect {
	return []BatchEffect{{Kind: BatchWait, After: view.Approval.ExpiresAt.Sub(now)}}
}

// expireApproval rejects a batch nobody approved in time.
func expireApproval(view *api.Batch, _ map[string]string, now time.Time) []BatchEffect {
	a := *view.Approval
	a.State, a.DecidedAt = task.ApprovalExpired, &now
	view.Approval = &a
	RejectBatch(view, now)
	return []BatchEffect{{Kind: BatchStoreEnd}, {Kind: BatchStop}}
}

// RejectBatch ends b rejected at now (by an operator, or its approval expired):
// its targets without a task are skipped.
func RejectBatch(b *api.Batch, now time.Time) {
	b.State, b.FinishedAt = api.BatchRejected, &now
	for i := range b.Targets {
		if t := &b.Targets[i]; t.State == api.TargetWaiting || t.State == "" {
			t.State = api.TargetSkipped
		}
	}
	b.Count()
}

// startTasks makes the waiting targets' tasks while max_parallel leaves room,
// in the order of the targets, then waits for one to end.
func startTasks(view *api.Batch, _ map[string]string, now time.Time) []BatchEffect {
	running := 0
	for _, t := range view.Targets {
		if t.Started() && !t.Final() {
			running++
		}
	}
	var out []BatchEffect
	for _, t := range view.Targets {
		if t.State != api.TargetWaiting {
			continue
		}
		if view.MaxParallel > 0 && running >= view.MaxParallel {
			break
		}
		out = append(out, BatchEffect{Kind: BatchMakeTask, AgentID: t.AgentID})
		running++
	}
	return append(out, waitFor(view, now))
}

// waitForATask waits for one of the batch's tasks to end.
func waitForATask(view *api.Batch, _ map[string]string, now time.Time) []BatchEffect {
	return []BatchEffect{waitFor(view, now)}
}

// waitFor waits for one of the batch's tasks to end (or an agent to register,
// which wakes the runner too), at most until the register grace ends while
// targets are registering.
func waitFor(view *api.Batch, now time.Time) BatchEffect {
	for _, t := range view.Targets {
		if t.State == api.TargetRegistering && view.RegisterUntil != nil {
			return BatchEffect{Kind: BatchWait, After: max(view.RegisterUntil.Sub(now), time.Millisecond)}
		}
	}
	return BatchEffect{Kind: BatchWait}
}

// admitAgents settles the registering targets whose agents the core knows now:
// one that gets a task waits for room, as the others did; one offline or
// unsupported gets none. The targets are stored, then the batch goes on.
func admitAgents(view *api.Batch, agents map[string]string, now time.Time) []BatchEffect {
	for i := range view.Targets {
		t := &view.Targets[i]
		s, ok := agents[t.AgentID]
		switch {
		case t.State != api.TargetRegistering || !ok || s == api.TargetRegistering:
		case s == "":
			t.TaskID, t.State = derivedID("batch-task", view.ID, t.AgentID), api.TargetWaiting
		default:
			t.State = s
		}
	}
	return goOn(view, agents, now)
}

// giveUpOnAgents makes the targets still registering when the grace is over
// unknown, stores the targets, and goes on.
func giveUpOnAgents(view *api.Batch, agents map[string]string, now time.Time) []BatchEffect {
	for i := range view.Targets {
		if t := &view.Targets[i]; t.State == api.TargetRegistering {
			t.State = api.TargetUnknown
		}
	}
	return goOn(view, agents, now)
}

// goOn stores a view whose targets a row settled, then ends the batch if
// every target is done with, or starts what has room.
func goOn(view *api.Batch, agents map[string]string, now time.Time) []BatchEffect {
	settle(view)
	if view.State.Final() {
		return endBatch(view, agents, now)
	}
	return append([]BatchEffect{{Kind: BatchStoreTargets}}, startTasks(view, agents, now)...)
}

// endBatch stores a batch whose targets are all done with as finished.
func endBatch(view *api.Batch, _ map[string]string, now time.Time) []BatchEffect {
	view.FinishedAt = &now
	return []BatchEffect{{Kind: BatchStoreEnd}, {Kind: BatchStop}}
}

// stopBatch ends the runner of a batch whose end is stored.
func stopBatch(*api.Batch, map[string]string, time.Time) []BatchEffect {
	return []BatchEffect{{Kind: BatchStop}}
}

// lookLater is the row of a pair observeBatch never gives: look again later.
func lookLater(*api.Batch, map[string]string, time.Time) []BatchEffect {
	return []BatchEffect{{Kind: BatchWait, After: Retry}}
}
