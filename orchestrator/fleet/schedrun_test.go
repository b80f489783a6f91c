package fleet

import (
	"errors"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// deploySpec is a workflow of one gate, whose runs need env; maxRuns bounds
// them.
func deploySpec(maxRuns int, params map[string]api.WorkflowParam) api.WorkflowSpec {
	return api.WorkflowSpec{Name: "deploy", MaxRuns: maxRuns, Params: params,
		Steps: []api.WorkflowStep{{Name: "gate", Approval: &api.WorkflowGate{}}}}
}

// needsEnv are deploySpec's usual parameters.
var needsEnv = map[string]api.WorkflowParam{"env": {Required: true}}

// runsOf counts the runs of workflow deploy.
func runsOf(t *testing.T, f *Fleet) int {
	t.Helper()
	runs, err := f.Runs("deploy", 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(runs)
}

// TestAScheduleFiresAWorkflowRun: a schedule's firing starts a run of its
// workflow with its parameters, under an id derived from the schedule and the
// fire time, recorded in the firing; made again (the firing's record lost) it
// finds that run. A firing the workflow refuses (max_runs reached, the
// workflow gone, its parameters no longer good) makes nothing, is recorded
// all the same and is not tried again.
func TestAScheduleFiresAWorkflowRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxRuns int
		running int                  // runs of deploy running as it fires
		change  func(f *Fleet) error // what becomes of deploy before it fires
		made    bool
	}{
		{name: "a run made", maxRuns: 1, made: true},
		{name: "beside a running run, max_runs 2", maxRuns: 2, running: 1, made: true},
		{name: "max_runs reached: skipped", maxRuns: 1, running: 1},
		{name: "the workflow deleted: skipped", maxRuns: 1, change: func(f *Fleet) error { return f.DeleteWorkflow("deploy") }},
		{name: "its parameters refused: skipped", maxRuns: 1, change: func(f *Fleet) error {
			_, err := f.PutWorkflow(deploySpec(1, map[string]api.WorkflowParam{"region": {Required: true}}))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New(Params{Core: newFakeCore(), Store: &memRecords{}}) // stopped: its runs wait
			if _, err := f.PutWorkflow(deploySpec(tc.maxRuns, needsEnv)); err != nil {
				t.Fatal(err)
			}
			for range tc.running {
				if _, err := f.StartRun("deploy", api.WorkflowRunRequest{Params: map[string]any{"env": "test"}}, "tester"); err != nil {
					t.Fatal(err)
				}
			}
			s, err := f.AddSchedule(api.ScheduleSpec{Name: "nightly", Cron: "* * * * * *",
				Workflow: &api.ScheduleWorkflow{Name: "deploy", Params: map[string]any{"env": "prod"}}})
			if err != nil {
				t.Fatal(err)
			}
			if tc.change != nil {
				if err := tc.change(f); err != nil {
					t.Fatal(err)
				}
			}
			started := s.CreatedAt
			at := started.Truncate(time.Second).Add(time.Second)
			now := at.Add(100 * time.Millisecond)
			// A failure looks again after Retry; a firing done, at the next.
			if next := f.FireDue(started, now); !next.Equal(at.Add(time.Second)) {
				t.Fatalf("next look at %s, want %s: the clock tries the firing again", next, at.Add(time.Second))
			}
			got, err := f.GetSchedule("nightly")
			if err != nil || got.Last == nil || !got.Last.At.Equal(at) {
				t.Fatalf("the firing at %s is not recorded: %+v %v", at, got.Last, err)
			}
			id := derivedID("schedule-run", "nightly", at.UTC().Format(time.RFC3339Nano))
			run, err := f.GetRun(id)
			if !tc.made {
				if !errors.Is(err, task.ErrNotFound) || got.Last.RunID != "" || runsOf(t, f) != tc.running {
					t.Fatalf("a refused firing made run %+v (%v), recorded %q; %d runs", run, err, got.Last.RunID, runsOf(t, f))
				}
				f.FireDue(started, now) // recorded: not tried again
				if _, err := f.GetRun(id); !errors.Is(err, task.ErrNotFound) {
					t.Fatalf("the skipped firing was tried again: %v", err)
				}
				return
			}
			if err != nil || got.Last.RunID != id {
				t.Fatalf("the firing recorded run %q; run %s: %v", got.Last.RunID, id, err)
			}
			if run.Workflow != "deploy" || run.Schedule != "nightly" || run.FireTime == nil || !run.FireTime.Equal(at) ||
				run.CreatedBy != "schedule nightly" || run.Params["env"] != "prod" {
				t.Fatalf("the run as made: %+v", run)
			}
			if err := f.st.PutRecord(FiringRecord, "nightly", nil); err != nil { // its record lost
				t.Fatal(err)
			}
			f.FireDue(started, now)
			if n := runsOf(t, f); n != tc.running+1 {
				t.Fatalf("%d runs after the firing was made again, want %d", n, tc.running+1)
			}
			if got, err := f.GetSchedule("nightly"); err != nil || got.Last.RunID != id {
				t.Fatalf("made again, the firing recorded %+v %v", got.Last, err)
			}
		})
	}
}

// TestAScheduleOfAWorkflowIsCheckedWhenAdded: a schedule names exactly one
// of a task, a batch and a workflow; its workflow must be there and take its
// parameters.
func TestAScheduleOfAWorkflowIsCheckedWhenAdded(t *testing.T) {
	f := New(Params{Core: newFakeCore(), Store: &memRecords{}})
	if _, err := f.PutWorkflow(deploySpec(1, needsEnv)); err != nil {
		t.Fatal(err)
	}
	req := &api.SubmitRequest{ToAgent: "code", WorkType: "echo"}
	for _, tc := range []struct {
		name  string
		w     *api.ScheduleWorkflow
		task  *api.SubmitRequest
		field string
	}{
		{"a task and a workflow", &api.ScheduleWorkflow{Name: "deploy", Params: map[string]any{"env": "prod"}}, req, "task"},
		{"a name no workflow may have", &api.ScheduleWorkflow{Name: "De ploy"}, nil, "workflow.name"},
		{"no such workflow", &api.ScheduleWorkflow{Name: "nope"}, nil, "workflow.name"},
		{"a required parameter missing", &api.ScheduleWorkflow{Name: "deploy"}, nil, "workflow.params.env"},
		{"an undeclared parameter", &api.ScheduleWorkflow{Name: "deploy", Params: map[string]any{"env": "prod", "x": 1}}, nil, "workflow.params.x"},
	} {
		_, err := f.AddSchedule(api.ScheduleSpec{Name: "nightly", Cron: "@daily", Task: tc.task, Workflow: tc.w})
		var fe *api.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: %v, want a refusal of %s", tc.name, err, tc.field)
		}
	}
	if s, err := f.AddSchedule(api.ScheduleSpec{Name: "nightly", Cron: "@daily",
		Workflow: &api.ScheduleWorkflow{Name: "deploy", Params: map[string]any{"env": "prod"}}}); err != nil || s.Workflow.Name != "deploy" {
		t.Fatalf("a good schedule of deploy: %+v %v", s, err)
	}
}
