package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/core"
	"github.com/chiffon-dev/chiffon/orchestrator/fleet"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// batchApprovalNeeded says why batch b needs an approval, or "": its work type
// does, or one of the agents it makes a task for does.
func (o *Orchestrator) batchApprovalNeeded(b *api.Batch) string {
	req := b.TaskFor("")
	if why := o.approvalNeeded(&req); why != "" {
		return why
	}
	for _, t := range b.Targets {
		if t.State == api.TargetWaiting && o.agentRequiresApproval(t.AgentID, b.WorkType) {
			return fmt.Sprintf("agent %s requires approval for %s (approval_required)", t.AgentID, b.WorkType)
		}
	}
	return ""
}

// DecideBatch approves or rejects batch id, waiting for approval, on behalf of
// ctx's caller: approved, its runner makes its tasks (approved with it);
// rejected, it ends rejected and makes none.
func (o *Orchestrator) DecideBatch(ctx context.Context, id string, approve bool, note string) (*api.Batch, error) {
	if len(note) > maxApprovalNote {
		return nil, &api.FieldError{Field: "note", Message: fmt.Sprintf("must be at most %d bytes", maxApprovalNote)}
	}
	o.batchMu.Lock()
	defer o.batchMu.Unlock()
	b, err := o.storedBatch(id)
	if err != nil {
		return nil, err
	}
	if b.State != api.BatchRunning || b.Approval == nil || b.Approval.State != task.ApprovalWaiting {
		return b, core.ErrNotAwaitingApproval
	}
	now := time.Now().UTC()
	a := b.Approval
	a.By, a.Note, a.DecidedAt = CallerOf(ctx), note, &now
	a.State = task.ApprovalApproved
	if !approve {
		a.State = task.ApprovalRejected
		fleet.RejectBatch(b, now)
	}
	if err := o.putBatch(b); err != nil {
		return nil, err
	}
	if !approve {
		o.batchFinished(b)
	}
	o.fleet.taskEnded(id) // wakes its runner
	return o.GetBatch(id)
}
