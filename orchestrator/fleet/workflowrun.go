package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
	"github.com/chiffon-dev/chiffon/workflow"
)

// runWorkflow runs run id until its end is stored: it reads the run and what
// its running steps made, asks the workflow machine (DecideRun) what to do,
// and does it. It holds runMu while it does, as the calls that change a run
// (CancelRun, DecideStep) do, so that none of them overwrites the other.
func (f *Fleet) runWorkflow(ctx context.Context, id string, wake <-chan struct{}) {
	log := f.log.With("run_id", id)
	runSteps(ctx, wake, func() (time.Duration, bool) { return f.stepRun(id, log) })
}

// stepRun looks at run id once and carries out what the machine says: it
// reports whether the runner stops, or else how long to wait at most (0:
// until something of the run changes).
func (f *Fleet) stepRun(id string, log *slog.Logger) (after time.Duration, stop bool) {
	f.runMu.Lock()
	defer f.runMu.Unlock()
	run, err := f.storedRun(id)
	if err != nil {
		log.Warn("workflow run: read it", "err", err)
		return Retry, errors.Is(err, task.ErrNotFound) // gone: nothing to run; else try again
	}
	seen, err := f.seeSteps(run)
	if err != nil {
		log.Warn("workflow run: read its steps", "err", err)
		return Retry, false
	}
	view, effects := DecideRun(run, seen, time.Now().UTC())
	lookNow := false // a step failed as it was made: the steps after it may go on now
	for _, e := range effects {
		switch e.Kind {
		case RunStore:
			if err := f.putRun(&view); err != nil {
				log.Warn("workflow run: store it", "err", err)
				return Retry, false
			}
		case RunMakeStep:
			failed, err := f.makeStep(&view, e.Step)
			if err != nil {
				log.Warn("workflow run: make a step", "step", e.Step, "err", err)
				return Retry, false
			}
			lookNow = lookNow || failed
		case RunCancelStep:
			f.cancelStep(&view, e.Step, log)
		case RunStepEvent:
			f.stepEvent(&view, e.Step)
		case RunFinished:
			log.Info("workflow run finished", "workflow", view.Workflow, "state", view.State)
			f.hooks.Send(webhook.WorkflowFinished, &view)
		case RunWait:
			if lookNow {
				return time.Nanosecond, false
			}
			return e.After, false
		case RunStop:
			return 0, true
		}
	}
	return 0, false
}

// seeSteps reads what run's running steps made: each task or batch, missing
// or as it is now. Gates are the machine's to read.
func (f *Fleet) seeSteps(run *api.WorkflowRun) (map[string]StepSeen, error) {
	seen := map[string]StepSeen{}
	var ids []string
	for _, s := range run.Steps {
		if s.State == api.StepRunning && s.TaskID != "" {
			ids = append(ids, s.TaskID)
		}
	}
	tasks, err := f.core.TasksByID(ids)
	if err != nil {
		return nil, err
	}
	for _, s := range run.Steps {
		switch {
		case s.State != api.StepRunning:
		case s.TaskID != "":
			seen[s.Name] = taskSeen(tasks[s.TaskID])
		case s.BatchID != "":
			bs, err := f.batchSeen(s.BatchID)
			if err != nil {
				return nil, err
			}
			seen[s.Name] = bs
		}
	}
	return seen, nil
}

// taskSeen is what a task step shows: its task t (nil: not made).
func taskSeen(t *task.Task) StepSeen {
	switch {
	case t == nil:
		return StepSeen{Missing: true}
	case !t.State.Final():
		return StepSeen{}
	}
	out := StepSeen{Ended: true, Succeeded: t.State == task.StateSucceeded}
	if t.Result != nil && len(t.Result.StructuredOutput) > 0 {
		_ = json.Unmarshal(t.Result.StructuredOutput, &out.Output)
	}
	if !out.Succeeded {
		out.Error = "task " + t.ID + " " + string(t.State)
		switch {
		case t.Error != nil:
			out.Error += ": " + t.Error.Message
		case t.Result != nil && t.Result.ExitCode != 0:
			out.Error += fmt.Sprintf(" (exit code %d)", t.Result.ExitCode)
		}
	}
	return out
}

// batchSeen is what a batch step shows: its batch id, and once it ended, the
// structured output of each of its tasks by agent id.
func (f *Fleet) batchSeen(id string) (StepSeen, error) {
	b, err := f.storedBatch(id)
	switch {
	case errors.Is(err, task.ErrNotFound):
		return StepSeen{Missing: true}, nil
	case err != nil:
		return StepSeen{}, err
	case !b.State.Final():
		return StepSeen{}, nil
	}
	tasks, err := f.batchTasks(b)
	if err != nil {
		return StepSeen{}, err
	}
	outputs := map[string]any{}
	for _, t := range b.Targets {
		if seen := taskSeen(tasks[t.TaskID]); seen.Output != nil {
			outputs[t.AgentID] = seen.Output
		}
	}
	out := StepSeen{Ended: true, Succeeded: b.State == api.BatchSucceeded, Output: outputs}
	if !out.Succeeded {
		out.Error = fmt.Sprintf("batch %s %s %v", b.ID, b.State, b.Counts)
	}
	return out, nil
}

// makeStep makes step name of view: its task or its batch, with its
// parameters' templates expanded, or tells the receivers that its gate waits.
// A step the core refuses for good (a template that reads nothing, a request
// the catalogue or the size limits refuse, a batch no agent matches) fails,
// stored so (failed); an error is worth another look.
func (f *Fleet) makeStep(view *api.WorkflowRun, name string) (failed bool, err error) {
	s, spec := view.Step(name), specStep(view, name)
	if spec.Approval != nil {
		f.hooks.Send(webhook.ApprovalRequested, view)
		return false, nil
	}
	err = f.submitStep(view, s, spec)
	if err == nil || !refusedForGood(err, f.large) {
		return false, err
	}
	now := time.Now().UTC()
	s.State, s.Error, s.FinishedAt = api.StepFailed, err.Error(), &now
	if err := f.putRun(view); err != nil {
		return false, err
	}
	f.stepEvent(view, name)
	return true, nil
}

// submitStep makes s's task or batch.
func (f *Fleet) submitStep(view *api.WorkflowRun, s *api.StepRun, spec *api.WorkflowStep) error {
	scope := runScope(view)
	by := view.CreatedBy
	if by == "" {
		by = "workflow " + view.Workflow
	}
	if spec.Batch != nil {
		req := *spec.Batch
		params, err := workflow.ExpandParams(req.Parameters, scope)
		if err != nil {
			return stepError{err}
		}
		req.Parameters = params
		if err := req.Validate(); err != nil {
			return stepError{err}
		}
		_, err = f.createBatch(req, batchOrigin{id: s.BatchID, schedule: view.Schedule, fireTime: view.FireTime,
			by: by, workflowRun: view.ID})
		return err
	}
	req := *spec.Task
	params, err := workflow.ExpandParams(req.Parameters, scope)
	if err != nil {
		return stepError{err}
	}
	req.Parameters = params
	if err := req.Validate(); err != nil {
		return stepError{err}
	}
	if err := f.core.CheckWorkType(&req); err != nil {
		return stepError{err}
	}
	if err := f.core.CheckSize(&req); err != nil {
		return err
	}
	org := task.Origin{ID: s.TaskID, RequestID: derivedID("workflow-request", view.ID, s.Name),
		Schedule: view.Schedule, FireTime: view.FireTime, By: by, WorkflowRun: view.ID}
	_, _, err = f.core.SubmitAs(req, org)
	return err
}

// stepError is a refusal of a step's request that trying again cannot mend.
type stepError struct{ error }

func (e stepError) Unwrap() error { return e.error }

// refusedForGood reports whether err ends a step rather than asks for another
// try.
func refusedForGood(err, tooLarge error) bool {
	var (
		se stepError
		fe *api.FieldError
		we *api.WorkTypeError
	)
	return errors.As(err, &se) || errors.As(err, &fe) || errors.As(err, &we) || errors.Is(err, ErrBatchNoTargets) ||
		tooLarge != nil && errors.Is(err, tooLarge)
}

// runScope is what the templates of view's steps read: its parameters and
// its ended steps.
func runScope(view *api.WorkflowRun) *workflow.Scope {
	sc := &workflow.Scope{RunID: view.ID, Params: view.Params, Steps: map[string]workflow.StepValues{}}
	for _, s := range view.Steps {
		if s.State.Final() {
			sc.Steps[s.Name] = workflow.StepValues{Output: s.Output, TaskID: s.TaskID, BatchID: s.BatchID}
		}
	}
	return sc
}

// cancelStep cancels step name's task, or stops its batch.
func (f *Fleet) cancelStep(view *api.WorkflowRun, name string, log *slog.Logger) {
	s := view.Step(name)
	switch {
	case s.TaskID != "":
		if _, err := f.core.Cancel(s.TaskID, view.Error); err != nil && !errors.Is(err, api.ErrFinished) {
			log.Warn("workflow run: cancel a step's task", "step", name, "err", err)
		}
	case s.BatchID != "":
		if err := f.stopBatch(s.BatchID, view.Error); err != nil {
			log.Warn("workflow run: stop a step's batch", "step", name, "err", err)
		}
	}
}

// stepEvent tells the webhook receivers that step name started or ended.
func (f *Fleet) stepEvent(view *api.WorkflowRun, name string) {
	s := view.Step(name)
	event := webhook.WorkflowStepStarted
	if s.State.Final() {
		event = webhook.WorkflowStepFinished
	}
	f.hooks.Send(event, &api.WorkflowStepEvent{RunID: view.ID, Workflow: view.Workflow, Step: *s})
}
