package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
)

// batchRetry is how long a batch's runner waits after the store or a submit
// failed before it tries again.
const batchRetry = time.Second

// runBatch runs batch b until every target is done with: it makes the tasks of
// the waiting targets while there is room under max_parallel (none once one
// failed, with stop_on_failure), wakes when one of them ends, and stores the
// batch's final view. Each task's id is the one the record names, so a task
// made before (by an earlier runner, before a restart) is found, not made again.
func (o *Orchestrator) runBatch(ctx context.Context, b *api.Batch, wake <-chan struct{}) {
	defer o.fleet.batchEnded(b.ID)
	log := o.log.With("batch_id", b.ID)
	for {
		again := o.stepBatch(b, log)
		if again < 0 {
			return
		}
		var retry <-chan time.Time
		if again > 0 {
			retry = time.After(again)
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-retry:
		}
	}
}

// stepBatch makes what b's tasks allow now: it returns -1 once b is finished
// and stored, 0 to wait for a task to end, or how long to wait before looking
// again (after a failure, or while b awaits its approval).
func (o *Orchestrator) stepBatch(b *api.Batch, log *slog.Logger) time.Duration {
	if a := b.Approval; a != nil && a.State == ApprovalWaiting {
		return o.awaitBatchApproval(b, log)
	}
	view := *b
	view.Targets = slices.Clone(b.Targets)
	if err := o.refresh(&view); err != nil {
		log.Warn("batch: read its tasks", "err", err)
		return batchRetry
	}
	if view.State.Final() {
		now := time.Now().UTC()
		view.FinishedAt = &now
		if err := o.putBatch(&view); err != nil {
			log.Warn("batch: store its end", "err", err)
			return batchRetry
		}
		log.Info("batch finished", "state", view.State, "counts", fmt.Sprint(view.Counts))
		o.batchFinished(&view)
		return -1
	}
	running := 0
	for _, t := range view.Targets {
		if t.Started() && !t.Final() {
			running++
		}
	}
	for _, t := range view.Targets {
		if t.State != api.TargetWaiting {
			continue
		}
		if b.MaxParallel > 0 && running >= b.MaxParallel {
			break
		}
		org := origin{id: t.TaskID, requestID: derivedID("batch-request", b.ID, t.AgentID),
			batchID: b.ID, schedule: b.Schedule, fireTime: b.FireTime, by: b.CreatedBy, approval: b.Approval}
		if _, _, err := o.submit(b.TaskFor(t.AgentID), org); err != nil {
			log.Warn("batch: make a task", "agent_id", t.AgentID, "err", err)
			return batchRetry
		}
		running++
		o.fleet.bump()
	}
	return 0
}

// batchFinished tells the webhook receivers that b's end is stored.
func (o *Orchestrator) batchFinished(b *api.Batch) {
	if o.hooks != nil {
		o.hooks.Send(webhook.BatchFinished, b)
	}
}

// runningBatches reads the batches whose record says they run.
func (o *Orchestrator) runningBatches() ([]*api.Batch, error) {
	recs, err := o.st.Records(batchRecord)
	if err != nil {
		return nil, fmt.Errorf("read batches: %w", err)
	}
	var out []*api.Batch
	for id, data := range recs {
		var b api.Batch
		if err := json.Unmarshal(data, &b); err != nil {
			o.log.Error("batch record unreadable; it is left as it is", "batch_id", id, "err", err)
			continue
		}
		if b.State == api.BatchRunning {
			out = append(out, &b)
		}
	}
	return out, nil
}
