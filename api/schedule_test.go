package api_test

import (
	"errors"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
)

// TestAScheduleMakesExactlyOneThing: a schedule makes a task, a batch or a
// workflow run, exactly one; a workflow's name is checked as a schedule's.
func TestAScheduleMakesExactlyOneThing(t *testing.T) {
	task := &api.SubmitRequest{ToAgent: "code", WorkType: "echo"}
	batch := &api.BatchRequest{ToAgent: "code", WorkType: "echo"}
	wf := &api.ScheduleWorkflow{Name: "deploy", Params: map[string]any{"env": "prod"}}
	cases := []struct {
		name  string
		spec  api.ScheduleSpec
		field string // "": valid
	}{
		{"a task", api.ScheduleSpec{Task: task}, ""},
		{"a batch", api.ScheduleSpec{Batch: batch}, ""},
		{"a workflow", api.ScheduleSpec{Workflow: wf}, ""},
		{"nothing", api.ScheduleSpec{}, "task"},
		{"a task and a workflow", api.ScheduleSpec{Task: task, Workflow: wf}, "task"},
		{"a batch and a workflow", api.ScheduleSpec{Batch: batch, Workflow: wf}, "task"},
		{"all three", api.ScheduleSpec{Task: task, Batch: batch, Workflow: wf}, "task"},
		{"a workflow without a name", api.ScheduleSpec{Workflow: &api.ScheduleWorkflow{}}, "workflow.name"},
		{"a workflow's name no workflow may have", api.ScheduleSpec{Workflow: &api.ScheduleWorkflow{Name: "De.ploy"}}, "workflow.name"},
		{"a bad task", api.ScheduleSpec{Task: &api.SubmitRequest{ToAgent: "robot", WorkType: "echo"}}, "task.to_agent"},
	}
	for _, tc := range cases {
		tc.spec.Name, tc.spec.Cron = "nightly", "@daily"
		err := tc.spec.Validate()
		var fe *api.FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%s: %v, want a refusal of %s", tc.name, err, tc.field)
		}
	}
}
