package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
)

// runBatch runs batch b until its end is stored: it looks at the batch, asks the
// batch machine (DecideBatch) what to do, and does it: makes the tasks of the
// waiting targets, stores the end, or waits until one of its tasks ends, the
// approval expires, or a failure is worth trying again. Each task's id is the
// one the record names, so a task made before (by an earlier runner, before a
// restart) is found, not made again.
func (f *Fleet) runBatch(ctx context.Context, b *api.Batch, wake <-chan struct{}) {
	log := f.log.With("batch_id", b.ID)
	runSteps(ctx, wake, func() (time.Duration, bool) { return f.stepBatch(b, log) })
}

// runSteps calls step until it says stop, waiting between two calls for a wake,
// or for as long as step said (0: a wake alone), or until ctx ends: the loop of
// a batch's and a workflow run's runner.
func runSteps(ctx context.Context, wake <-chan struct{}, step func() (after time.Duration, stop bool)) {
	for {
		after, stop := step()
		if stop {
			return
		}
		var retry <-chan time.Time
		if after > 0 {
			retry = time.After(after)
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-retry:
		}
	}
}

// stepBatch looks at b once and carries out what the machine says: it reports
// whether the runner stops, or else how long to wait at most (0: until one of
// b's tasks ends). While b awaits its approval, or when a workflow run made it
// (whose cancel may stop it), its record is read again and the step holds
// batchMu, which an operator's decision and stopBatch hold too.
func (f *Fleet) stepBatch(b *api.Batch, log *slog.Logger) (after time.Duration, stop bool) {
	if a := b.Approval; a != nil && a.State == task.ApprovalWaiting || b.WorkflowRun != "" {
		f.batchMu.Lock()
		defer f.batchMu.Unlock()
		stored, err := f.storedBatch(b.ID)
		if err != nil {
			log.Warn("batch: read its approval", "err", err)
			return Retry, false
		}
		*b = *stored
	}
	tasks, err := f.batchTasks(b)
	if err != nil {
		log.Warn("batch: read its tasks", "err", err)
		return Retry, false
	}
	agents, err := f.registeringAgents(b)
	if err != nil {
		log.Warn("batch: ask after its registering agents", "err", err)
		return Retry, false
	}
	view, effects := DecideBatch(b, tasks, agents, time.Now().UTC())
	for _, e := range effects {
		switch e.Kind {
		case BatchStoreTargets:
			b.Targets = slices.Clone(view.Targets)
			if err := f.putBatch(b); err != nil {
				log.Warn("batch: store its targets", "err", err)
				return Retry, false
			}
			f.changed.bump()
		case BatchMakeTask:
			org := task.Origin{ID: taskOf(b, e.AgentID), RequestID: derivedID("batch-request", b.ID, e.AgentID),
				BatchID: b.ID, WorkflowRun: b.WorkflowRun, Schedule: b.Schedule, FireTime: b.FireTime, By: b.CreatedBy, Approval: b.Approval}
			if _, _, err := f.core.SubmitAs(b.TaskFor(e.AgentID), org); err != nil {
				log.Warn("batch: make a task", "agent_id", e.AgentID, "err", err)
				return Retry, false
			}
			f.changed.bump()
		case BatchStoreEnd:
			if err := f.putBatch(&view); err != nil {
				log.Warn("batch: store its end", "err", err)
				return Retry, false
			}
			log.Info("batch finished", "state", view.State, "counts", fmt.Sprint(view.Counts))
			f.batchFinished(&view)
		case BatchWait:
			return e.After, false
		case BatchStop:
			return 0, true
		}
	}
	return 0, false
}

// registeringAgents asks the core what it knows now of the agents of b's
// registering targets (DecideBatch's agents): "" for one that would get a task,
// unsupported for one whose catalogue refuses b's request pinned to it, else
// the target's state. Nil when no target is registering.
func (f *Fleet) registeringAgents(b *api.Batch) (map[string]string, error) {
	req := b.BatchRequest
	req.Agents = nil
	for _, t := range b.Targets {
		if t.State == api.TargetRegistering {
			req.Agents = append(req.Agents, t.AgentID)
		}
	}
	if len(req.Agents) == 0 {
		return nil, nil
	}
	targets, err := f.core.BatchTargets(&req)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(targets))
	for _, t := range targets {
		out[t.AgentID] = t.State
		if t.State != "" {
			continue
		}
		// Refused now, it gets no task: the batch, made, is not refused whole
		// as it would have been had the agent been there.
		tr := b.TaskFor(t.AgentID)
		err := f.core.CheckWorkType(&tr)
		if err == nil {
			err = f.core.CheckSize(&tr)
		}
		if err != nil {
			f.log.Warn("batch: an agent that registered late refuses its task; it gets none",
				"batch_id", b.ID, "agent_id", t.AgentID, "err", err)
			out[t.AgentID] = api.TargetUnsupported
		}
	}
	return out, nil
}

// taskOf is the id of agentID's task in b.
func taskOf(b *api.Batch, agentID string) string {
	for _, t := range b.Targets {
		if t.AgentID == agentID {
			return t.TaskID
		}
	}
	return ""
}

// batchFinished tells the webhook receivers that b's end is stored.
func (f *Fleet) batchFinished(b *api.Batch) {
	f.hooks.Send(webhook.BatchFinished, b)
	if b.WorkflowRun != "" {
		f.RunChanged(b.WorkflowRun)
	}
}

// runningBatches reads the batches whose record says they run.
func (f *Fleet) runningBatches() ([]*api.Batch, error) {
	recs, err := f.st.Records(BatchRecord)
	if err != nil {
		return nil, fmt.Errorf("read batches: %w", err)
	}
	var out []*api.Batch
	for id, data := range recs {
		var b api.Batch
		if err := json.Unmarshal(data, &b); err != nil {
			f.log.Error("batch record unreadable; it is left as it is", "batch_id", id, "err", err)
			continue
		}
		if b.State == api.BatchRunning {
			out = append(out, &b)
		}
	}
	return out, nil
}
