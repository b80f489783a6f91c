package taskview

import (
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// ApprovalHint is the line that says t waits for an operator's yes and how to give
// it, or "" when it does not wait.
func ApprovalHint(t *task.Task) string {
	if t.State != task.StateAwaitingApproval {
		return ""
	}
	return waitsForApproval("task", t.ID, t.Approval)
}

// BatchApprovalHint is ApprovalHint for batch b, which asks once for all its
// tasks.
func BatchApprovalHint(b *api.Batch) string {
	if b.State != api.BatchAwaitingApproval {
		return ""
	}
	return waitsForApproval("batch", b.ID, b.Approval)
}

// waitsForApproval says that the task or batch id waits for approval a, and
// how to decide.
func waitsForApproval(what, id string, a *task.Approval) string {
	why := "it requires approval"
	if a != nil && a.Why != "" {
		why = a.Why
	}
	return fmt.Sprintf("%s %s is waiting for approval (%s): chiffon approve %s (or chiffon reject %s)", what, id, why, id, id)
}

// BatchSummary is the line that ends a followed batch.
func BatchSummary(b *api.Batch) string {
	s := fmt.Sprintf("batch %s %s: %s", b.ID, b.State, CountsText(b.Counts))
	if b.FinishedAt != nil {
		s += " in " + b.FinishedAt.Sub(b.CreatedAt).Round(time.Millisecond).String()
	}
	return s
}
