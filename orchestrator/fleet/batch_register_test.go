package fleet

// The rows of a batch some of whose agents are configured and have not
// registered yet: the batch waits for them for its register grace.

import (
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// btRegistering is btBatch whose target c is registering, its grace ending at
// until.
func btRegistering(maxParallel int, until time.Time) *api.Batch {
	b := btBatch(maxParallel, false)
	b.Targets[2] = api.BatchTarget{AgentID: "c", State: api.TargetRegistering}
	b.RegisterUntil = &until
	return b
}

// graceLeft is how long btRegistering(…, btNow.Add(time.Minute)) waits at most.
var graceLeft = BatchEffect{Kind: BatchWait, After: time.Minute}

var storeTargets = BatchEffect{Kind: BatchStoreTargets}

var registerRows = []batchMachineRow{
	{name: "c registering: a and b start, the wait ends with the grace",
		batch: btRegistering(0, btNow.Add(time.Minute)), agents: map[string]string{"c": api.TargetRegistering},
		state: api.BatchRunning, targets: []string{"waiting", "waiting", "registering"},
		effects: []BatchEffect{makeTask("a"), makeTask("b"), graceLeft}},
	{name: "c registering, no room: busy until a task ends or the grace does",
		batch: btRegistering(1, btNow.Add(time.Minute)), tasks: map[string]task.State{"a": task.StateRunning},
		agents: map[string]string{"c": api.TargetRegistering},
		state:  api.BatchRunning, targets: []string{"running", "waiting", "registering"},
		effects: []BatchEffect{graceLeft}},
	{name: "c registered: its target stored with its task, which starts",
		batch: btRegistering(0, btNow.Add(time.Minute)), tasks: map[string]task.State{"a": task.StateRunning, "b": task.StateRunning},
		agents: map[string]string{"c": ""},
		state:  api.BatchRunning, targets: []string{"running", "running", "waiting"},
		effects: []BatchEffect{storeTargets, makeTask("c"), waitTask}},
	{name: "c registered offline, the rest done: failed, end stored",
		batch: btRegistering(0, btNow.Add(time.Minute)), tasks: map[string]task.State{"a": task.StateSucceeded, "b": task.StateSucceeded},
		agents: map[string]string{"c": api.TargetOffline},
		state:  api.BatchFailed, targets: []string{"succeeded", "succeeded", "offline"},
		effects: []BatchEffect{storeEnd, stopRunner}},
	{name: "grace over, a and b running: c unknown, stored, wait for a task",
		batch: btRegistering(0, btNow), tasks: map[string]task.State{"a": task.StateRunning, "b": task.StateRunning},
		agents: map[string]string{"c": api.TargetRegistering},
		state:  api.BatchRunning, targets: []string{"running", "running", "unknown"},
		effects: []BatchEffect{storeTargets, waitTask}},
	{name: "grace over, the rest succeeded: c unknown, failed",
		batch: btRegistering(0, btNow), tasks: map[string]task.State{"a": task.StateSucceeded, "b": task.StateSucceeded},
		agents: map[string]string{"c": api.TargetRegistering},
		state:  api.BatchFailed, targets: []string{"succeeded", "succeeded", "unknown"},
		effects: []BatchEffect{storeEnd, stopRunner}},
	{name: "stop_on_failure, one failed: the registering one skipped too",
		batch: func() *api.Batch {
			b := btRegistering(0, btNow.Add(time.Minute))
			b.StopOnFailure = true
			return b
		}(), tasks: map[string]task.State{"a": task.StateFailed, "b": task.StateSucceeded},
		agents: map[string]string{"c": api.TargetRegistering},
		state:  api.BatchFailed, targets: []string{"failed", "succeeded", "skipped"},
		effects: []BatchEffect{storeEnd, stopRunner}},
}
