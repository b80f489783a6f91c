package task

import (
	"testing"
	"time"
)

// A clone reads the same after the task it was taken from changes in place, as
// the orchestrator's loop changes a live task (an approval that expires, a step
// that moves on) while an API caller encodes the clone.
func TestCloneDoesNotChangeWithTheTask(t *testing.T) {
	now := time.Now()
	tk := &Task{ID: "t", State: StateRunning,
		Steps:    []StepInfo{{Number: 1, Status: "running"}},
		Result:   &Result{ExitCode: 0},
		Error:    &TaskError{Code: 5001, Message: "timeout"},
		Approval: &Approval{State: ApprovalWaiting, RequestedAt: now}}
	c := tk.Clone()
	tk.Steps[0].Status = "done"
	tk.Result.ExitCode = 1
	tk.Error.Message = "changed"
	tk.Approval.State = ApprovalExpired
	if c.Steps[0].Status != "running" || c.Result.ExitCode != 0 || c.Error.Message != "timeout" || c.Approval.State != ApprovalWaiting {
		t.Fatalf("the clone changed with the task: %+v %+v %+v %+v", c.Steps[0], *c.Result, *c.Error, *c.Approval)
	}
}
