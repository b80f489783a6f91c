package fleet

// The workflow run's life as a table: each row is a run record and what the
// runner saw of its running steps, and checks the view's step states and the
// effects DecideRun returns. No store, NATS or timer: the clock is fixed.

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

var wtNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// wtSpec is backup -> upgrade -> smoke, with notify on smoke's failure and a
// gate before upgrade:
//
//	backup -> gate -> upgrade -> smoke -> notify (when: failure)
func wtSpec() api.WorkflowSpec {
	task := func(w string) *api.SubmitRequest {
		return &api.SubmitRequest{ToAgent: envelope.Infra, WorkType: w}
	}
	return api.WorkflowSpec{Name: "nightly", Timeout: "1h", Steps: []api.WorkflowStep{
		{Name: "backup", Task: task("backup")},
		{Name: "gate", Needs: []api.WorkflowNeed{{Step: "backup"}}, Approval: &api.WorkflowGate{Expires: "10m"}},
		{Name: "upgrade", Needs: []api.WorkflowNeed{{Step: "gate"}}, Batch: &api.BatchRequest{ToAgent: envelope.Infra, WorkType: "upgrade"}},
		{Name: "smoke", Needs: []api.WorkflowNeed{{Step: "upgrade"}}, Task: task("smoke")},
		{Name: "notify", Needs: []api.WorkflowNeed{{Step: "smoke", When: api.NeedFailure}}, Task: task("notify")},
	}}
}

// wtRun is a running run of wtSpec whose steps are in states, in spec order
// ("" is pending); a running task step has task id t-NAME, a running batch
// step b-NAME, a running gate a waiting approval that expires in 10 minutes.
func wtRun(states ...api.StepState) *api.WorkflowRun {
	spec := wtSpec()
	deadline := wtNow.Add(time.Hour)
	r := &api.WorkflowRun{ID: "r1", Workflow: spec.Name, State: api.RunRunning, Spec: spec,
		CreatedAt: wtNow.Add(-time.Minute), Deadline: &deadline}
	for i, s := range spec.Steps {
		st := api.StepRun{Name: s.Name, State: api.StepPending}
		if i < len(states) && states[i] != "" {
			st.State = states[i]
		}
		if st.State.Final() {
			at := wtNow.Add(-time.Second)
			st.FinishedAt = &at
		}
		if st.State == api.StepRunning {
			switch {
			case s.Task != nil:
				st.TaskID = "t-" + s.Name
			case s.Batch != nil:
				st.BatchID = "b-" + s.Name
			default:
				st.Approval = &task.Approval{State: task.ApprovalWaiting, RequestedAt: wtNow, ExpiresAt: wtNow.Add(10 * time.Minute)}
			}
		}
		r.Steps = append(r.Steps, st)
	}
	return r
}

const (
	P = api.StepPending
	R = api.StepRunning
	S = api.StepSucceeded
	F = api.StepFailed
	K = api.StepSkipped
)

func reStore() RunEffect             { return RunEffect{Kind: RunStore} }
func reMake(step string) RunEffect   { return RunEffect{Kind: RunMakeStep, Step: step} }
func reEv(step string) RunEffect     { return RunEffect{Kind: RunStepEvent, Step: step} }
func reCancel(step string) RunEffect { return RunEffect{Kind: RunCancelStep, Step: step} }
func reWait(d time.Duration) RunEffect {
	return RunEffect{Kind: RunWait, After: d}
}

var (
	reFinished = RunEffect{Kind: RunFinished}
	reStop     = RunEffect{Kind: RunStop}
)

type runRow struct {
	name    string
	run     *api.WorkflowRun
	seen    map[string]StepSeen
	state   api.RunState
	steps   []api.StepState // the view's, in spec order
	effects []RunEffect
}

func won(out any) StepSeen { return StepSeen{Ended: true, Succeeded: true, Output: out} }
func lost(msg string) StepSeen {
	return StepSeen{Ended: true, Error: msg}
}

func with(r *api.WorkflowRun, f func(*api.WorkflowRun)) *api.WorkflowRun { f(r); return r }

var runRows = []runRow{
	{"a new run: the first step stored running, then made", wtRun(), nil,
		api.RunRunning, []api.StepState{R, P, P, P, P},
		[]RunEffect{reStore(), reMake("backup"), reEv("backup"), reWait(time.Hour)}},
	{"its task runs: nothing changes", wtRun(R), map[string]StepSeen{"backup": {}},
		api.RunRunning, []api.StepState{R, P, P, P, P}, []RunEffect{reWait(time.Hour)}},
	{"stored running, its task missing: made again", wtRun(R), map[string]StepSeen{"backup": {Missing: true}},
		api.RunRunning, []api.StepState{R, P, P, P, P}, []RunEffect{reMake("backup"), reWait(time.Hour)}},
	{"its task succeeded: the end stored before the gate opens", wtRun(R), map[string]StepSeen{"backup": won(map[string]any{"path": "/nas/1"})},
		api.RunRunning, []api.StepState{S, R, P, P, P},
		[]RunEffect{reStore(), reEv("backup"), reMake("gate"), reEv("gate"), reWait(10 * time.Minute)}},
	{"the gate waits: look again at its expiry", wtRun(S, R), nil,
		api.RunRunning, []api.StepState{S, R, P, P, P}, []RunEffect{reWait(10 * time.Minute)}},
	{"the gate approved: the batch step starts", with(wtRun(S, R), func(r *api.WorkflowRun) { r.Steps[1].Approval.State = task.ApprovalApproved }), nil,
		api.RunRunning, []api.StepState{S, S, R, P, P},
		[]RunEffect{reStore(), reEv("gate"), reMake("upgrade"), reEv("upgrade"), reWait(time.Hour)}},
	{"the gate rejected: it fails, the rest down the success edges skipped, notify runs", with(wtRun(S, R), func(r *api.WorkflowRun) { r.Steps[1].Approval.State = task.ApprovalRejected }), nil,
		api.RunRunning, []api.StepState{S, F, K, K, R},
		[]RunEffect{reStore(), reEv("gate"), reEv("upgrade"), reEv("smoke"), reMake("notify"), reEv("notify"), reWait(time.Hour)}},
	{"the gate expired unanswered: it fails", with(wtRun(S, R), func(r *api.WorkflowRun) { r.Steps[1].Approval.ExpiresAt = wtNow }), nil,
		api.RunRunning, []api.StepState{S, F, K, K, R},
		[]RunEffect{reStore(), reEv("gate"), reEv("upgrade"), reEv("smoke"), reMake("notify"), reEv("notify"), reWait(time.Hour)}},
	{"the batch failed: smoke skipped upstream, notify runs", wtRun(S, S, R), map[string]StepSeen{"upgrade": lost("batch failed")},
		api.RunRunning, []api.StepState{S, S, F, K, R},
		[]RunEffect{reStore(), reEv("upgrade"), reEv("smoke"), reMake("notify"), reEv("notify"), reWait(time.Hour)}},
	{"smoke succeeded: notify's condition cannot hold, skipped; the run succeeded", wtRun(S, S, S, R), map[string]StepSeen{"smoke": won(nil)},
		api.RunSucceeded, []api.StepState{S, S, S, S, K},
		[]RunEffect{reStore(), reEv("smoke"), reEv("notify"), reFinished, reStop}},
	{"notify ended after a failure: the run failed", wtRun(S, S, F, K, R), map[string]StepSeen{"notify": won(nil)},
		api.RunFailed, []api.StepState{S, S, F, K, S},
		[]RunEffect{reStore(), reEv("notify"), reFinished, reStop}},
	{"cancel asked: the running task cancelled, the pending skipped", with(wtRun(R), func(r *api.WorkflowRun) { r.CancelAsked = &wtNow }), map[string]StepSeen{"backup": {}},
		api.RunRunning, []api.StepState{R, K, K, K, K},
		[]RunEffect{reStore(), reCancel("backup"), reEv("gate"), reEv("upgrade"), reEv("smoke"), reEv("notify"), reWait(Retry)}},
	{"cancelled, its task ended: the run ended cancelled", with(wtRun(R, K, K, K, K), func(r *api.WorkflowRun) { r.CancelAsked = &wtNow; r.Error = "run cancelled" }),
		map[string]StepSeen{"backup": lost("task cancelled")},
		api.RunCancelled, []api.StepState{F, K, K, K, K},
		[]RunEffect{reStore(), reEv("backup"), reFinished, reStop}},
	{"cancelled at a gate: the gate fails at once", with(wtRun(S, R), func(r *api.WorkflowRun) { r.CancelAsked = &wtNow }), nil,
		api.RunCancelled, []api.StepState{S, F, K, K, K},
		[]RunEffect{reStore(), reEv("gate"), reEv("upgrade"), reEv("smoke"), reEv("notify"), reFinished, reStop}},
	{"past its deadline: timed out, the running batch stopped", with(wtRun(S, S, R), func(r *api.WorkflowRun) { d := wtNow; r.Deadline = &d }),
		map[string]StepSeen{"upgrade": {}},
		api.RunRunning, []api.StepState{S, S, R, K, K},
		[]RunEffect{reStore(), reCancel("upgrade"), reEv("smoke"), reEv("notify"), reWait(Retry)}},
	{"stopping, the step's end succeeded meanwhile: succeeded", with(wtRun(S, S, R, K, K), func(r *api.WorkflowRun) { r.Error = "run timed out after 1h" }),
		map[string]StepSeen{"upgrade": won(nil)},
		api.RunFailed, []api.StepState{S, S, S, K, K},
		[]RunEffect{reStore(), reEv("upgrade"), reFinished, reStop}},
	{"a need stored failed: skipped at once, and the failure edge after it holds", wtRun(S, S, F), nil,
		api.RunRunning, []api.StepState{S, S, F, K, R},
		[]RunEffect{reStore(), reEv("smoke"), reMake("notify"), reEv("notify"), reWait(time.Hour)}},
	{"an ended run: the runner stops", with(wtRun(S, S, S, S, K), func(r *api.WorkflowRun) { r.State = api.RunSucceeded; r.FinishedAt = &wtNow }), nil,
		api.RunSucceeded, []api.StepState{S, S, S, S, K}, []RunEffect{reStop}},
}

// TestWorkflowMachineDecidesWhatARunnerDoes runs the table.
func TestWorkflowMachineDecidesWhatARunnerDoes(t *testing.T) {
	for _, row := range runRows {
		t.Run(row.name, func(t *testing.T) {
			before := fmt.Sprint(row.run.Steps)
			view, effects := DecideRun(row.run, row.seen, wtNow)
			if view.State != row.state {
				t.Errorf("run state %s, want %s", view.State, row.state)
			}
			var states []api.StepState
			for _, s := range view.Steps {
				states = append(states, s.State)
			}
			if !reflect.DeepEqual(states, row.steps) {
				t.Errorf("steps %v, want %v", states, row.steps)
			}
			if !reflect.DeepEqual(effects, row.effects) {
				t.Errorf("effects %+v,\nwant %+v", effects, row.effects)
			}
			if fmt.Sprint(row.run.Steps) != before {
				t.Error("DecideRun changed the record it was given")
			}
			for _, s := range view.Steps {
				if s.State.Final() && s.FinishedAt == nil {
					t.Errorf("step %s ended with no finished_at", s.Name)
				}
				if s.State == api.StepRunning && s.TaskID == "" && s.BatchID == "" && s.Approval == nil {
					t.Errorf("step %s runs with nothing made", s.Name)
				}
			}
			if view.State.Final() && view.FinishedAt == nil {
				t.Error("an ended run has no finished_at")
			}
		})
	}
}

// TestWorkflowMachineStoresEndsBeforeItStartsSteps: whenever a step starts,
// the run is stored first, in the same look, with every step it needs ended.
func TestWorkflowMachineStoresEndsBeforeItStartsSteps(t *testing.T) {
	for _, row := range runRows {
		view, effects := DecideRun(row.run, row.seen, wtNow)
		stored := false
		for _, e := range effects {
			switch e.Kind {
			case RunStore:
				stored = true
			case RunMakeStep:
				if !stored && row.run.Step(e.Step).State == api.StepPending {
					t.Errorf("%s: step %s started before the run was stored", row.name, e.Step)
				}
				for _, n := range specStep(&view, e.Step).Needs {
					if !view.Step(n.Step).State.Final() {
						t.Errorf("%s: step %s started while %s has not ended", row.name, e.Step, n.Step)
					}
				}
			}
		}
	}
}

// TestWorkflowMachineHasARowForEveryStateAndEvent fails when a step state or
// event has no row, and when the table leaves a row that changes something
// untried.
func TestWorkflowMachineHasARowForEveryStateAndEvent(t *testing.T) {
	for _, s := range stepStates {
		for _, e := range stepEvents {
			if stepRows[stepKey{s, e}] == nil {
				t.Errorf("no row for a %s step that sees %q", s, e)
			}
		}
	}
	if len(stepRows) != len(stepStates)*len(stepEvents) {
		t.Errorf("%d rows for %d states and %d events: a row for a state or event the lists lack",
			len(stepRows), len(stepStates), len(stepEvents))
	}
	tried := map[stepKey]bool{}
	for _, row := range runRows {
		if row.run.State.Final() {
			continue
		}
		view := *row.run
		if view.Error == "" {
			view.Error = stopping(&view, wtNow)
		}
		seen := withGates(&view, row.seen, wtNow)
		for i := range view.Steps {
			tried[stepKey{view.Steps[i].State, observeStep(&view, &view.Steps[i], seen[view.Steps[i].Name])}] = true
		}
	}
	nothing := reflect.ValueOf(nothingYet).Pointer()
	for k, row := range stepRows {
		if reflect.ValueOf(row).Pointer() != nothing && !tried[k] {
			t.Errorf("the row for a %s step that sees %q is never tried", k.state, k.event)
		}
	}
}

// TestSkippedStepsSayWhy: a step skipped down a failed branch says which step
// failed, and counts as failed for a failure edge after it; one whose failure
// edge did not hold is skipped without failing upstream.
func TestSkippedStepsSayWhy(t *testing.T) {
	view, _ := DecideRun(wtRun(S, S, R), map[string]StepSeen{"upgrade": lost("batch failed")}, wtNow)
	smoke := view.Step("smoke")
	if !smoke.UpstreamFailed || !strings.Contains(smoke.SkipReason, "upgrade failed") {
		t.Errorf("smoke skipped as %+v, want upstream failed naming upgrade", smoke)
	}
	view, _ = DecideRun(wtRun(S, S, S, R), map[string]StepSeen{"smoke": won(nil)}, wtNow)
	if n := view.Step("notify"); n.UpstreamFailed || n.State != api.StepSkipped {
		t.Errorf("notify %+v, want skipped, not upstream failed", n)
	}
}
