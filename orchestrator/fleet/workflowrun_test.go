package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
	"go.uber.org/goleak"
)

// chainSpec is count -> report(count: ${steps.count.output.n}) -> gate, with
// cleanup on report's failure.
func chainSpec() api.WorkflowSpec {
	return api.WorkflowSpec{Name: "chain", Params: map[string]api.WorkflowParam{"host": {Required: true}},
		Steps: []api.WorkflowStep{
			{Name: "count", Task: &api.SubmitRequest{ToAgent: envelope.Code, WorkType: "count",
				Parameters: map[string]any{"host": "${params.host}"}}},
			{Name: "report", Needs: []api.WorkflowNeed{{Step: "count"}}, Task: &api.SubmitRequest{ToAgent: envelope.Code,
				WorkType: "report", Parameters: map[string]any{"count": "${steps.count.output.n}", "line": "n=${steps.count.output.n} on ${params.host}"}}},
			{Name: "gate", Needs: []api.WorkflowNeed{{Step: "report"}}, Approval: &api.WorkflowGate{}},
			{Name: "cleanup", Needs: []api.WorkflowNeed{{Step: "report", When: api.NeedFailure}}, Task: &api.SubmitRequest{ToAgent: envelope.Code, WorkType: "cleanup"}},
		}}
}

// endWith ends task id in state with structured output out.
func (c *fakeCore) endWith(id string, s task.State, out string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tasks[id].State = s
	c.tasks[id].Result = &task.Result{StructuredOutput: json.RawMessage(out)}
}

func (c *fakeCore) task(id string) task.Task {
	c.mu.Lock()
	defer c.mu.Unlock()
	return *c.tasks[id]
}

// nextMade waits for the runner's next SubmitAs.
func nextMade(t *testing.T, core *fakeCore) task.Origin {
	t.Helper()
	select {
	case org := <-core.made:
		return org
	case <-time.After(10 * time.Second):
		t.Fatal("no task made")
	}
	return task.Origin{}
}

// awaitRun waits until run id satisfies ok.
func awaitRun(t *testing.T, f *Fleet, id string, ok func(*api.WorkflowRun) bool) *api.WorkflowRun {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		changed := f.Changes()
		r, err := f.GetRun(id)
		if err == nil && ok(r) {
			return r
		}
		select {
		case <-changed:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("run %s: %+v, %v", id, r, err)
		}
	}
}

// TestWorkflowRunPassesTypedOutputAndWaitsAtItsGate: a step's structured
// output reaches the next step typed (a number stays a number) and written
// into text; the gate holds the run until it is approved; the run succeeds;
// the webhook events come in order.
func TestWorkflowRunPassesTypedOutputAndWaitsAtItsGate(t *testing.T) {
	defer goleak.VerifyNone(t)
	core := newFakeCore()
	events := make(chan string, 32)
	f := New(Params{Core: core, Store: &memRecords{}, Workflows: []api.WorkflowSpec{chainSpec()},
		Hooks: hookFunc(func(ev string, _ any) { events <- ev })})
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if _, err := f.StartRun("chain", api.WorkflowRunRequest{}, "op"); err == nil {
		t.Fatal("a run without its required parameter started")
	}
	run, err := f.StartRun("chain", api.WorkflowRunRequest{Params: map[string]any{"host": "nas"}}, "op")
	if err != nil {
		t.Fatal(err)
	}
	count := nextMade(t, core)
	if got := core.task(count.ID).Parameters["host"]; got != "nas" || count.WorkflowRun != run.ID || count.By != "op" {
		t.Fatalf("count made as %+v with host %v", count, got)
	}
	core.endWith(count.ID, task.StateSucceeded, `{"n": 3}`)
	f.RunChanged(run.ID)
	report := nextMade(t, core)
	params := core.task(report.ID).Parameters
	if n, ok := params["count"].(float64); !ok || n != 3 {
		t.Fatalf("report's count = %#v, want the number 3", params["count"])
	}
	if params["line"] != "n=3 on nas" {
		t.Fatalf("report's line = %#v", params["line"])
	}
	if _, err := f.DecideStep(run.ID, "gate", true, "op", ""); !errors.Is(err, task.ErrNotAwaitingApproval) {
		t.Fatalf("a gate not opened yet was decided: %v", err)
	}
	core.end(report.ID, task.StateSucceeded)
	f.RunChanged(run.ID)
	awaitRun(t, f, run.ID, func(r *api.WorkflowRun) bool { return r.Step("gate").State == api.StepRunning })
	if _, err := f.DecideStep(run.ID, "gate", true, "op", "fine"); err != nil {
		t.Fatal(err)
	}
	done := awaitRun(t, f, run.ID, func(r *api.WorkflowRun) bool { return r.State.Final() })
	if done.State != api.RunSucceeded || done.Step("cleanup").State != api.StepSkipped {
		t.Fatalf("run ended %+v", done)
	}
	want := []string{webhook.WorkflowStepStarted, // count
		webhook.WorkflowStepFinished, webhook.WorkflowStepStarted, // count, report
		webhook.WorkflowStepFinished, webhook.WorkflowStepFinished, webhook.ApprovalRequested, webhook.WorkflowStepStarted, // report, cleanup skipped, gate
		webhook.WorkflowStepFinished, webhook.WorkflowFinished} // gate, the run
	var got []string
	for range want {
		got = append(got, <-events)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v,\nwant %v", got, want)
	}
}

// TestWorkflowRunResumesWithoutMakingAStepTwice: a fleet stopped while a step
// runs (an orchestrator that died) and started again finds the step's task by
// its derived id and makes no other; the run goes on.
func TestWorkflowRunResumesWithoutMakingAStepTwice(t *testing.T) {
	defer goleak.VerifyNone(t)
	core := newFakeCore()
	recs := &memRecords{}
	p := Params{Core: core, Store: recs, Workflows: []api.WorkflowSpec{chainSpec()}}
	f := New(p)
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	run, err := f.StartRun("chain", api.WorkflowRunRequest{Params: map[string]any{"host": "nas"}}, "op")
	if err != nil {
		t.Fatal(err)
	}
	count := nextMade(t, core)
	f.Stop()
	core.endWith(count.ID, task.StateSucceeded, `{"n": 1}`)

	g := New(p) // the next orchestrator, on the same store
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	report := nextMade(t, core)
	if report.ID == count.ID || report.ID != derivedID("workflow-task", run.ID, "report") {
		t.Fatalf("resumed run made %s, want report's derived id", report.ID)
	}
	core.endWith(report.ID, task.StateFailed, "")
	core.mu.Lock()
	core.tasks[report.ID].Result.ExitCode = 3
	core.mu.Unlock()
	g.RunChanged(run.ID)
	cleanup := nextMade(t, core)
	core.end(cleanup.ID, task.StateSucceeded)
	g.RunChanged(run.ID)
	done := awaitRun(t, g, run.ID, func(r *api.WorkflowRun) bool { return r.State.Final() })
	if done.State != api.RunFailed || done.Step("gate").State != api.StepSkipped {
		t.Fatalf("run ended %+v", done)
	}
	if e := done.Step("report").Error; !strings.Contains(e, "failed (exit code 3)") {
		t.Errorf("report's error %q names no exit code", e)
	}
	select {
	case org := <-core.made:
		t.Fatalf("task %s made after the run ended", org.ID)
	default:
	}
}

// TestWorkflowRunCancelAndMaxRuns: max_runs refuses a second run; a cancel
// cancels the running step's task, skips the rest and ends the run
// cancelled; a cancel of an ended run is refused.
func TestWorkflowRunCancelAndMaxRuns(t *testing.T) {
	defer goleak.VerifyNone(t)
	core := newFakeCore()
	f := New(Params{Core: core, Store: &memRecords{}, Workflows: []api.WorkflowSpec{chainSpec()}})
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	req := api.WorkflowRunRequest{Params: map[string]any{"host": "nas"}}
	run, err := f.StartRun("chain", req, "op")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.StartRun("chain", req, "op"); !errors.Is(err, ErrTooManyRuns) {
		t.Fatalf("second run: %v, want ErrTooManyRuns", err)
	}
	count := nextMade(t, core)
	if _, err := f.CancelRun(run.ID, "op"); err != nil {
		t.Fatal(err)
	}
	done := awaitRun(t, f, run.ID, func(r *api.WorkflowRun) bool { return r.State.Final() })
	if done.State != api.RunCancelled || core.task(count.ID).State != task.StateCancelled {
		t.Fatalf("run %s, task %s", done.State, core.task(count.ID).State)
	}
	for _, s := range done.Steps[1:] {
		if s.State != api.StepSkipped || s.SkipReason != "run cancelled" {
			t.Errorf("step %s %s (%s), want skipped: run cancelled", s.Name, s.State, s.SkipReason)
		}
	}
	if _, err := f.CancelRun(run.ID, "op"); !errors.Is(err, ErrRunFinished) {
		t.Fatalf("cancel of an ended run: %v", err)
	}
	if _, err := f.StartRun("chain", req, "op"); err != nil {
		t.Fatalf("a run after the first ended: %v", err)
	}
}

// TestWorkflowStepRefusedForGoodFails: a step whose request is refused for
// good (a batch no agent matches, parameters the catalogue refuses, a
// template that reads a missing value) fails at once, named so, and the run
// takes its failure branch; it is not tried again.
func TestWorkflowStepRefusedForGoodFails(t *testing.T) {
	defer goleak.VerifyNone(t)
	core := newFakeCore() // no agent: a batch matches none
	core.refuses = "x"
	spec := api.WorkflowSpec{Name: "refused", Steps: []api.WorkflowStep{
		{Name: "fan", Batch: &api.BatchRequest{ToAgent: envelope.Code, WorkType: "build"}},
		{Name: "pinned", Task: &api.SubmitRequest{ToAgent: envelope.Code, WorkType: "build", Hints: &task.Hints{AgentID: "x"}}},
		{Name: "reads", Task: &api.SubmitRequest{ToAgent: envelope.Code, WorkType: "build",
			Parameters: map[string]any{"v": "${steps.fan.output.nope}"}}, Needs: []api.WorkflowNeed{{Step: "fan", When: api.NeedAlways}}},
		{Name: "after", Needs: []api.WorkflowNeed{{Step: "reads", When: api.NeedFailure}}, Task: &api.SubmitRequest{ToAgent: envelope.Code, WorkType: "build"}},
	}}
	f := New(Params{Core: core, Store: &memRecords{}, Workflows: []api.WorkflowSpec{spec}})
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	run, err := f.StartRun("refused", api.WorkflowRunRequest{}, "op")
	if err != nil {
		t.Fatal(err)
	}
	after := nextMade(t, core)
	if after.ID != derivedID("workflow-task", run.ID, "after") {
		t.Fatalf("made %s, want the failure branch's task", after.ID)
	}
	got := awaitRun(t, f, run.ID, func(r *api.WorkflowRun) bool { return r.Step("reads").State.Final() })
	for name, want := range map[string]string{"fan": "no agent matches", "pinned": "", "reads": "fan.output is not an object"} {
		s := got.Step(name)
		if s.State != api.StepFailed || !strings.Contains(s.Error, want) {
			t.Errorf("step %s %s (%s), want failed with %q", name, s.State, s.Error, want)
		}
	}
}

// flakyRecords fails the reads of stored workflow runs while failing is set.
type flakyRecords struct {
	memRecords
	mu      sync.Mutex
	failing bool
	failed  chan struct{}
}

func (f *flakyRecords) Record(kind, id string) ([]byte, error) {
	f.mu.Lock()
	failing := f.failing
	f.mu.Unlock()
	data, err := f.memRecords.Record(kind, id)
	if failing && kind == RunRecord && err == nil {
		select {
		case f.failed <- struct{}{}:
		default:
		}
		return nil, errors.New("store unreachable")
	}
	return data, err
}

// TestWorkflowRunnerOutlivesAFailedReadAndStopsForAGoneRun: a run's record
// that cannot be read is read again later, and the run goes on; a runner
// whose run's record is gone stops.
func TestWorkflowRunnerOutlivesAFailedReadAndStopsForAGoneRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	core := newFakeCore()
	recs := &flakyRecords{failing: true, failed: make(chan struct{}, 1)}
	f := New(Params{Core: core, Store: recs, Workflows: []api.WorkflowSpec{chainSpec()}})
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	run, err := f.startRun("chain", map[string]any{"host": "nas"}, "r1", "", nil, "op")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-recs.failed:
	case <-time.After(10 * time.Second):
		t.Fatal("the runner did not read the run")
	}
	recs.mu.Lock()
	recs.failing = false
	recs.mu.Unlock()
	count := nextMade(t, core) // after the failed read, the run went on
	if count.WorkflowRun != run.ID {
		t.Fatalf("made %+v", count)
	}
	if err := recs.PutRecord(RunRecord, run.ID, nil); err != nil {
		t.Fatal(err)
	}
	f.RunChanged(run.ID)
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		_, running := f.cur.runs[run.ID]
		f.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the runner of a run whose record is gone did not stop")
		}
		time.Sleep(10 * time.Millisecond) // polling the fleet's runner table, which has no signal of its own
	}
}
