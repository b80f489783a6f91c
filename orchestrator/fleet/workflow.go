package fleet

import (
	"maps"
	"slices"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// The workflow machine. A run's runner (workflowrun.go) reads the run's record
// and what each running step made (its task, its batch, its gate's decision);
// DecideRun says, from them and the clock alone, what the run is now and what
// the runner does next, as effects it carries out in order. Nothing here reads
// or writes: workflow_test.go holds a row for every state a step can be in and
// every event its runner can see, as batch_test.go does for a batch.

// stepEvent is what the runner sees of one step.
type stepEvent string

// Step events.
const (
	// stepWaiting: a step it needs has not ended.
	stepWaiting stepEvent = "needs waiting"
	// stepGo: every step it needs ended and every condition holds.
	stepGo stepEvent = "needs met"
	// stepNoGo: the steps it needs ended and a condition does not hold.
	stepNoGo stepEvent = "needs unmet"
	// stepBusy: its task or batch runs, or its gate waits.
	stepBusy stepEvent = "busy"
	// stepMissing: it runs and what it makes is not there: made again (its id
	// is derived, so a task made before is found, not made twice).
	stepMissing stepEvent = "missing"
	// stepWon and stepLost: its task or batch ended, its gate was answered:
	// succeeded, or not.
	stepWon  stepEvent = "succeeded"
	stepLost stepEvent = "failed"
	// stepStop: the run is cancelled or past its timeout.
	stepStop stepEvent = "run stopping"
)

// stepEvents lists every step event.
var stepEvents = []stepEvent{stepWaiting, stepGo, stepNoGo, stepBusy, stepMissing, stepWon, stepLost, stepStop}

// stepStates lists every state a step can be in.
var stepStates = []api.StepState{api.StepPending, api.StepRunning, api.StepSucceeded, api.StepFailed, api.StepSkipped}

// RunEffectKind is what a run effect asks of the runner.
type RunEffectKind int

// Run effect kinds.
const (
	// RunStore stores the view as the run's record.
	RunStore RunEffectKind = iota
	// RunMakeStep makes step Step's task or batch (its id is in the view), or
	// asks its gate's approval.
	RunMakeStep
	// RunCancelStep cancels step Step's task or batch.
	RunCancelStep
	// RunStepEvent tells the webhook receivers that step Step started or
	// ended (the view says which).
	RunStepEvent
	// RunFinished tells them that the run ended.
	RunFinished
	// RunWait looks again after After, or when what a step made changes;
	// After 0 waits for a change alone.
	RunWait
	// RunStop ends the runner: the run's end is stored.
	RunStop
)

// RunEffect is one thing the runner does, in order.
type RunEffect struct {
	Kind  RunEffectKind
	Step  string        // RunMakeStep, RunCancelStep, RunStepEvent
	After time.Duration // RunWait
}

// StepSeen is what the runner read of what a running step made: nothing yet
// (Missing), running (neither Ended), or its end.
type StepSeen struct {
	Missing bool
	Ended   bool
	// Succeeded is the end's outcome; Error says why it failed.
	Succeeded bool
	Error     string
	// Output is the step's structured output.
	Output any
}

// stepRow is one row of the machine: it changes step s of view and returns
// the effects of its change.
type stepRow func(view *api.WorkflowRun, s *api.StepRun, seen StepSeen, now time.Time) []RunEffect

// stepKey names a row.
type stepKey struct {
	state api.StepState
	event stepEvent
}

// stepRows is the machine: one row for each state and event.
var stepRows = map[stepKey]stepRow{
	{api.StepPending, stepWaiting}: nothingYet,
	{api.StepPending, stepGo}:      startStep,
	{api.StepPending, stepNoGo}:    skipStep,
	{api.StepPending, stepBusy}:    nothingYet,
	{api.StepPending, stepMissing}: nothingYet,
	{api.StepPending, stepWon}:     nothingYet,
	{api.StepPending, stepLost}:    nothingYet,
	{api.StepPending, stepStop}:    skipStopped,

	{api.StepRunning, stepWaiting}: nothingYet,
	{api.StepRunning, stepGo}:      nothingYet,
	{api.StepRunning, stepNoGo}:    nothingYet,
	{api.StepRunning, stepBusy}:    nothingYet,
	{api.StepRunning, stepMissing}: makeAgain,
	{api.StepRunning, stepWon}:     stepSucceeded,
	{api.StepRunning, stepLost}:    stepFailed,
	{api.StepRunning, stepStop}:    cancelStep,

	{api.StepSucceeded, stepWaiting}: nothingYet,
	{api.StepSucceeded, stepGo}:      nothingYet,
	{api.StepSucceeded, stepNoGo}:    nothingYet,
	{api.StepSucceeded, stepBusy}:    nothingYet,
	{api.StepSucceeded, stepMissing}: nothingYet,
	{api.StepSucceeded, stepWon}:     nothingYet,
	{api.StepSucceeded, stepLost}:    nothingYet,
	{api.StepSucceeded, stepStop}:    nothingYet,

	{api.StepFailed, stepWaiting}: nothingYet,
	{api.StepFailed, stepGo}:      nothingYet,
	{api.StepFailed, stepNoGo}:    nothingYet,
	{api.StepFailed, stepBusy}:    nothingYet,
	{api.StepFailed, stepMissing}: nothingYet,
	{api.StepFailed, stepWon}:     nothingYet,
	{api.StepFailed, stepLost}:    nothingYet,
	{api.StepFailed, stepStop}:    nothingYet,

	{api.StepSkipped, stepWaiting}: nothingYet,
	{api.StepSkipped, stepGo}:      nothingYet,
	{api.StepSkipped, stepNoGo}:    nothingYet,
	{api.StepSkipped, stepBusy}:    nothingYet,
	{api.StepSkipped, stepMissing}: nothingYet,
	{api.StepSkipped, stepWon}:     nothingYet,
	{api.StepSkipped, stepLost}:    nothingYet,
	{api.StepSkipped, stepStop}:    nothingYet,
}

// nothingYet changes nothing: the step waits, or is done with.
func nothingYet(*api.WorkflowRun, *api.StepRun, StepSeen, time.Time) []RunEffect { return nil }

// startStep starts s: running, with the id of what it makes, stored before it
// is made (RunMakeStep comes after the run's RunStore).
func startStep(view *api.WorkflowRun, s *api.StepRun, _ StepSeen, now time.Time) []RunEffect {
	s.State, s.StartedAt = api.StepRunning, &now
	spec := specStep(view, s.Name)
	switch {
	case spec.Task != nil:
		s.TaskID = derivedID("workflow-task", view.ID, s.Name)
	case spec.Batch != nil:
		s.BatchID = derivedID("workflow-batch", view.ID, s.Name)
	default:
		s.Approval = gateApproval(spec.Approval, now)
	}
	return []RunEffect{{Kind: RunMakeStep, Step: s.Name}, {Kind: RunStepEvent, Step: s.Name}}
}

// gateApproval is the waiting approval of a gate asked at now.
func gateApproval(g *api.WorkflowGate, now time.Time) *task.Approval {
	a := &task.Approval{State: task.ApprovalWaiting, RequestedAt: now}
	if d, err := time.ParseDuration(g.Expires); err == nil && d > 0 {
		a.ExpiresAt = now.Add(d)
	}
	return a
}

// skipStep skips s: a condition of its needs does not hold. It failed
// upstream when a need's step failed upstream or failed, and the condition was
// not failure or always on it.
func skipStep(view *api.WorkflowRun, s *api.StepRun, _ StepSeen, now time.Time) []RunEffect {
	s.State, s.FinishedAt = api.StepSkipped, &now
	s.SkipReason = "a condition of its needs does not hold"
	for _, n := range specStep(view, s.Name).Needs {
		if dep := view.Step(n.Step); failedBranch(dep) && n.Condition() == api.NeedSuccess {
			s.UpstreamFailed = true
			s.SkipReason = "step " + n.Step + " " + string(dep.State)
			if dep.State == api.StepSkipped {
				s.SkipReason += " (a step before it failed)"
			}
			break
		}
	}
	return []RunEffect{{Kind: RunStepEvent, Step: s.Name}}
}

// skipStopped skips a pending step of a stopping run.
func skipStopped(view *api.WorkflowRun, s *api.StepRun, _ StepSeen, now time.Time) []RunEffect {
	s.State, s.FinishedAt, s.SkipReason = api.StepSkipped, &now, view.Error
	return []RunEffect{{Kind: RunStepEvent, Step: s.Name}}
}

// makeAgain makes a running step's task or batch again: it was stored as
// started and is not there (the runner stopped between the two).
func makeAgain(_ *api.WorkflowRun, s *api.StepRun, _ StepSeen, _ time.Time) []RunEffect {
	return []RunEffect{{Kind: RunMakeStep, Step: s.Name}}
}

// stepSucceeded ends s succeeded, with its output.
func stepSucceeded(_ *api.WorkflowRun, s *api.StepRun, seen StepSeen, now time.Time) []RunEffect {
	s.State, s.FinishedAt, s.Output = api.StepSucceeded, &now, seen.Output
	return []RunEffect{{Kind: RunStepEvent, Step: s.Name}}
}

// stepFailed ends s failed; a gate nobody answered in time is closed
// expired.
func stepFailed(_ *api.WorkflowRun, s *api.StepRun, seen StepSeen, now time.Time) []RunEffect {
	s.State, s.FinishedAt, s.Output, s.Error = api.StepFailed, &now, seen.Output, seen.Error
	if a := s.Approval; a != nil && a.State == task.ApprovalWaiting {
		closed := *a
		closed.State, closed.DecidedAt = task.ApprovalExpired, &now
		s.Approval = &closed
	}
	return []RunEffect{{Kind: RunStepEvent, Step: s.Name}}
}

// gateSeen is what a running gate shows at now: its answer, or its expiry.
func gateSeen(a *task.Approval, now time.Time) StepSeen {
	switch {
	case a.State == task.ApprovalApproved:
		return StepSeen{Ended: true, Succeeded: true}
	case a.State == task.ApprovalWaiting && (a.ExpiresAt.IsZero() || now.Before(a.ExpiresAt)):
		return StepSeen{}
	case a.State == task.ApprovalWaiting:
		return StepSeen{Ended: true, Error: "approval expired unanswered"}
	}
	msg := "approval " + string(a.State)
	if a.By != "" {
		msg += " by " + a.By
	}
	if a.Note != "" {
		msg += ": " + a.Note
	}
	return StepSeen{Ended: true, Error: msg}
}

// cancelStep stops a running step of a stopping run: a gate fails at once; a
// task or batch is cancelled, and its end, when it comes, ends the step.
func cancelStep(view *api.WorkflowRun, s *api.StepRun, seen StepSeen, now time.Time) []RunEffect {
	switch {
	case seen.Ended && seen.Succeeded:
		return stepSucceeded(view, s, seen, now)
	case seen.Ended || s.Approval != nil:
		seen.Error = view.Error
		return stepFailed(view, s, seen, now)
	}
	return []RunEffect{{Kind: RunCancelStep, Step: s.Name}}
}

// failedBranch reports whether the branch through s failed: s failed, or was
// skipped because a step before it failed.
func failedBranch(s *api.StepRun) bool {
	return s.State == api.StepFailed || s.State == api.StepSkipped && s.UpstreamFailed
}

// holds reports whether need n's condition holds of its step dep, ended.
func holds(n api.WorkflowNeed, dep *api.StepRun) bool {
	switch n.Condition() {
	case api.NeedAlways:
		return true
	case api.NeedFailure:
		return failedBranch(dep)
	}
	return dep.State == api.StepSucceeded
}

// specStep is the spec of run's step name.
func specStep(run *api.WorkflowRun, name string) *api.WorkflowStep {
	for i := range run.Spec.Steps {
		if run.Spec.Steps[i].Name == name {
			return &run.Spec.Steps[i]
		}
	}
	return &api.WorkflowStep{}
}

// stopping is why run stops: cancelled, or past its deadline at now; "" when it
// does not.
func stopping(run *api.WorkflowRun, now time.Time) string {
	switch {
	case run.CancelAsked != nil:
		return "run cancelled"
	case run.Deadline != nil && !now.Before(*run.Deadline):
		return "run timed out after " + run.Spec.Timeout
	}
	return ""
}

// observeStep is the event s shows in view, given what was seen of it.
func observeStep(view *api.WorkflowRun, s *api.StepRun, seen StepSeen) stepEvent {
	switch {
	case view.Error != "" && !s.State.Final():
		return stepStop
	case s.State == api.StepRunning && seen.Missing:
		return stepMissing
	case s.State == api.StepRunning && seen.Ended && seen.Succeeded:
		return stepWon
	case s.State == api.StepRunning && seen.Ended:
		return stepLost
	case s.State != api.StepPending:
		return stepBusy
	}
	met := true
	for _, n := range specStep(view, s.Name).Needs {
		dep := view.Step(n.Step)
		if dep == nil || !dep.State.Final() {
			return stepWaiting
		}
		met = met && holds(n, dep)
	}
	if !met {
		return stepNoGo
	}
	return stepGo
}

// DecideRun returns run's view at now, given what was seen of its running
// steps (by name; a step not in seen is read as running), and what its runner
// does next. Steps end and are skipped first, as far as that goes; the view is
// stored; only then do steps start, so that a step starts only once the ends
// of its needs are stored. run itself is not changed.
func DecideRun(run *api.WorkflowRun, seen map[string]StepSeen, now time.Time) (api.WorkflowRun, []RunEffect) {
	view := *run
	view.Steps = slices.Clone(run.Steps)
	if view.State.Final() {
		return view, []RunEffect{{Kind: RunStop}}
	}
	if view.Error == "" {
		view.Error = stopping(&view, now)
	}
	seen = withGates(&view, seen, now)
	var ended, started []RunEffect
	moved := false
	// Each step once; then the pending ones again, as long as a skip leaves
	// another step's needs unmet.
	for pass, changed := 0, true; changed; pass++ {
		changed = false
		for i := range view.Steps {
			s := &view.Steps[i]
			ev := observeStep(&view, s, seen[s.Name])
			if ev == stepGo || pass > 0 && s.State != api.StepPending {
				continue // started below, once the ends are stored
			}
			before := s.State
			ended = append(ended, stepRows[stepKey{s.State, ev}](&view, s, seen[s.Name], now)...)
			changed = changed || s.State != before
			moved = moved || changed
		}
	}
	for i := range view.Steps {
		s := &view.Steps[i]
		if ev := observeStep(&view, s, seen[s.Name]); ev == stepGo {
			started = append(started, stepRows[stepKey{s.State, ev}](&view, s, seen[s.Name], now)...)
		}
	}
	endRun(&view, now)
	var effects []RunEffect
	if moved || len(started) > 0 || !sameRun(run, &view) {
		effects = append(effects, RunEffect{Kind: RunStore})
	}
	effects = append(effects, ended...)
	effects = append(effects, started...)
	if view.State.Final() {
		return view, append(effects, RunEffect{Kind: RunFinished}, RunEffect{Kind: RunStop})
	}
	return view, append(effects, RunEffect{Kind: RunWait, After: nextLook(&view, now)})
}

// withGates adds to seen what the running gates of view show at now.
func withGates(view *api.WorkflowRun, seen map[string]StepSeen, now time.Time) map[string]StepSeen {
	out := maps.Clone(seen)
	if out == nil {
		out = map[string]StepSeen{}
	}
	for _, s := range view.Steps {
		if s.State == api.StepRunning && s.Approval != nil {
			out[s.Name] = gateSeen(s.Approval, now)
		}
	}
	return out
}

// endRun ends view once every step ended: cancelled when a cancel was asked,
// failed when a step failed or it timed out, else succeeded.
func endRun(view *api.WorkflowRun, now time.Time) {
	for _, s := range view.Steps {
		if !s.State.Final() {
			return
		}
	}
	view.FinishedAt = &now
	switch {
	case view.CancelAsked != nil:
		view.State = api.RunCancelled
	case view.Error != "" || slices.ContainsFunc(view.Steps, func(s api.StepRun) bool { return s.State == api.StepFailed }):
		view.State = api.RunFailed
	default:
		view.State = api.RunSucceeded
	}
}

// nextLook is how long the runner may wait before it must look again: until
// the run's deadline or a gate's expiry; 0 when only a change can move it.
func nextLook(view *api.WorkflowRun, now time.Time) time.Duration {
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if view.Deadline != nil && view.Error == "" {
		consider(*view.Deadline)
	}
	for _, s := range view.Steps {
		if a := s.Approval; s.State == api.StepRunning && a != nil && a.State == task.ApprovalWaiting {
			consider(a.ExpiresAt)
		}
	}
	if view.Error != "" {
		return Retry // cancels were asked: look again soon, whatever comes
	}
	if next.IsZero() {
		return 0
	}
	return max(next.Sub(now), time.Millisecond)
}

// sameRun reports whether a and b hold the same run state and steps' states.
func sameRun(a, b *api.WorkflowRun) bool {
	if a.State != b.State || a.Error != b.Error || len(a.Steps) != len(b.Steps) {
		return false
	}
	for i := range a.Steps {
		if a.Steps[i].State != b.Steps[i].State {
			return false
		}
	}
	return true
}
