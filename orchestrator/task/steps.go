package task

import (
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

// EndSteps ends the steps t leaves open as it ends in state final (its agent
// ends the last one with the work_result, and an agent may not end any):
// step_completed when the task succeeded, else the final state itself,
// "failed", "cancelled" or "error". It reports whether it changed a step.
func (t *Task) EndSteps(final State, at time.Time) bool {
	end := string(final)
	if final == StateSucceeded {
		end = envelope.StatusStepCompleted
	}
	changed := false
	for i := range t.Steps {
		if s := &t.Steps[i]; s.Status != envelope.StatusStepCompleted && s.Status != end {
			s.Status, s.UpdatedAt = end, at
			changed = true
		}
	}
	return changed
}
