package fleet

// The batch's life as a table: each row is a batch record and its tasks as the
// runner reads them, and checks the view and the effects DecideBatch returns. No
// store, NATS or timer: the clock is fixed.

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

var btNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// btBatch is a running batch over agents a, b and c, their task ids t-a, t-b and
// t-c, with max_parallel and stop_on_failure as given.
func btBatch(maxParallel int, stopOnFailure bool) *api.Batch {
	b := &api.Batch{ID: "b1", State: api.BatchRunning, CreatedAt: btNow.Add(-time.Hour)}
	b.MaxParallel, b.StopOnFailure = maxParallel, stopOnFailure
	for _, id := range []string{"a", "b", "c"} {
		b.Targets = append(b.Targets, api.BatchTarget{AgentID: id, TaskID: "t-" + id, State: api.TargetWaiting})
	}
	return b
}

// btTasks are tasks by id, from agent -> state.
func btTasks(states map[string]task.State) map[string]*task.Task {
	out := map[string]*task.Task{}
	for agent, s := range states {
		out["t-"+agent] = &task.Task{ID: "t-" + agent, State: s}
	}
	return out
}

// btAwaiting is btBatch awaiting its approval, which expires at expires.
func btAwaiting(expires time.Time) *api.Batch {
	b := btBatch(0, false)
	b.Approval = &task.Approval{State: task.ApprovalWaiting, RequestedAt: btNow.Add(-time.Minute), ExpiresAt: expires}
	return b
}

// btFinal is a stored batch that ended in state.
func btFinal(state api.BatchState) *api.Batch {
	b := btBatch(0, false)
	b.State = state
	at := btNow.Add(-time.Minute)
	b.FinishedAt = &at
	return b
}

func makeTask(agent string) BatchEffect { return BatchEffect{Kind: BatchMakeTask, AgentID: agent} }

var (
	waitTask   = BatchEffect{Kind: BatchWait}
	storeEnd   = BatchEffect{Kind: BatchStoreEnd}
	stopRunner = BatchEffect{Kind: BatchStop}
)

type batchMachineRow struct {
	name    string
	batch   *api.Batch
	tasks   map[string]task.State
	state   api.BatchState // the view's
	targets []string       // the view's target states, a b c
	effects []BatchEffect
	agents  map[string]string // DecideBatch's
}

var batchMachineRows = []batchMachineRow{
	// awaiting_approval
	{"approval open: wait until it expires", btAwaiting(btNow.Add(time.Hour)), nil,
		api.BatchAwaitingApproval, []string{"waiting", "waiting", "waiting"},
		[]BatchEffect{{Kind: BatchWait, After: time.Hour}}, nil},
	{"approval expired: rejected, every target skipped, end stored", btAwaiting(btNow), nil,
		api.BatchRejected, []string{"skipped", "skipped", "skipped"}, []BatchEffect{storeEnd, stopRunner}, nil},

	// running
	{"room for all: every task made", btBatch(0, false), nil,
		api.BatchRunning, []string{"waiting", "waiting", "waiting"},
		[]BatchEffect{makeTask("a"), makeTask("b"), makeTask("c"), waitTask}, nil},
	{"max_parallel 2: two made, in target order", btBatch(2, false), nil,
		api.BatchRunning, []string{"waiting", "waiting", "waiting"},
		[]BatchEffect{makeTask("a"), makeTask("b"), waitTask}, nil},
	{"max_parallel 2, one ended: the third made", btBatch(2, false),
		map[string]task.State{"a": task.StateSucceeded, "b": task.StateRunning},
		api.BatchRunning, []string{"succeeded", "running", "waiting"}, []BatchEffect{makeTask("c"), waitTask}, nil},
	{"max_parallel 2, both running: busy", btBatch(2, false),
		map[string]task.State{"a": task.StateRunning, "b": task.StateDispatched},
		api.BatchRunning, []string{"running", "dispatched", "waiting"}, []BatchEffect{waitTask}, nil},
	{"stop_on_failure, one failed: the waiting one skipped, the running one finishes", btBatch(2, true),
		map[string]task.State{"a": task.StateFailed, "b": task.StateRunning},
		api.BatchRunning, []string{"failed", "running", "skipped"}, []BatchEffect{waitTask}, nil},
	{"stop_on_failure, one failed, the rest ended: failed", btBatch(2, true),
		map[string]task.State{"a": task.StateFailed, "b": task.StateSucceeded},
		api.BatchFailed, []string{"failed", "succeeded", "skipped"}, []BatchEffect{storeEnd, stopRunner}, nil},
	{"without stop_on_failure a failure starts the next", btBatch(2, false),
		map[string]task.State{"a": task.StateFailed, "b": task.StateRunning},
		api.BatchRunning, []string{"failed", "running", "waiting"}, []BatchEffect{makeTask("c"), waitTask}, nil},
	{"every task succeeded: succeeded, end stored", btBatch(0, false),
		map[string]task.State{"a": task.StateSucceeded, "b": task.StateSucceeded, "c": task.StateSucceeded},
		api.BatchSucceeded, []string{"succeeded", "succeeded", "succeeded"}, []BatchEffect{storeEnd, stopRunner}, nil},
	{"one cancelled, the rest succeeded: failed", btBatch(0, false),
		map[string]task.State{"a": task.StateSucceeded, "b": task.StateCancelled, "c": task.StateSucceeded},
		api.BatchFailed, []string{"succeeded", "cancelled", "succeeded"}, []BatchEffect{storeEnd, stopRunner}, nil},

	// stored ends: the runner only stops
	{"succeeded: stop", btFinal(api.BatchSucceeded), nil, api.BatchSucceeded,
		[]string{"waiting", "waiting", "waiting"}, []BatchEffect{stopRunner}, nil},
	{"failed: stop", btFinal(api.BatchFailed), nil, api.BatchFailed,
		[]string{"waiting", "waiting", "waiting"}, []BatchEffect{stopRunner}, nil},
	{"rejected: stop", btFinal(api.BatchRejected), nil, api.BatchRejected,
		[]string{"waiting", "waiting", "waiting"}, []BatchEffect{stopRunner}, nil},
}

// TestBatchMachineDecidesWhatARunnerDoes runs the table.
func TestBatchMachineDecidesWhatARunnerDoes(t *testing.T) {
	for _, row := range slices.Concat(batchMachineRows, registerRows) {
		t.Run(row.name, func(t *testing.T) {
			before := *row.batch
			view, effects := DecideBatch(row.batch, btTasks(row.tasks), row.agents, btNow)
			if view.State != row.state {
				t.Errorf("view state %s, want %s", view.State, row.state)
			}
			var targets []string
			for _, tg := range view.Targets {
				targets = append(targets, tg.State)
			}
			if !reflect.DeepEqual(targets, row.targets) {
				t.Errorf("targets %v, want %v", targets, row.targets)
			}
			if !reflect.DeepEqual(effects, row.effects) {
				t.Errorf("effects %+v, want %+v", effects, row.effects)
			}
			if row.batch.State != before.State || row.batch.Targets[0].State != before.Targets[0].State {
				t.Error("DecideBatch changed the record it was given")
			}
			if view.State.Final() && view.State != before.State && view.FinishedAt == nil {
				t.Error("a batch that ends has no finished_at")
			}
		})
	}
}

// TestBatchMachineHasARowForEveryStateAndEvent fails when a state or an event
// of a batch has no row, and when the table test leaves a row it can reach
// untried.
func TestBatchMachineHasARowForEveryStateAndEvent(t *testing.T) {
	for _, s := range batchStates {
		for _, e := range batchEvents {
			if batchRows[batchKey{s, e}] == nil {
				t.Errorf("no row for a %s batch that sees %q", s, e)
			}
		}
	}
	if len(batchRows) != len(batchStates)*len(batchEvents) {
		t.Errorf("%d rows for %d states and %d events: a row for a state or event the lists lack",
			len(batchRows), len(batchStates), len(batchEvents))
	}
	tried := map[batchKey]bool{}
	for _, row := range slices.Concat(batchMachineRows, registerRows) {
		state := row.batch.State
		if a := row.batch.Approval; a != nil && a.State == task.ApprovalWaiting {
			state = api.BatchAwaitingApproval
		}
		view := *row.batch
		view.Targets = append([]api.BatchTarget(nil), row.batch.Targets...)
		ViewBatch(&view, btTasks(row.tasks))
		tried[batchKey{state, observeBatch(&view, row.agents, btNow)}] = true
	}
	for _, s := range []api.BatchState{api.BatchAwaitingApproval, api.BatchRunning} {
		for _, e := range batchEvents {
			k := batchKey{s, e}
			if reflect.ValueOf(batchRows[k]).Pointer() != reflect.ValueOf(lookLater).Pointer() && !tried[k] {
				t.Errorf("the row for a %s batch that sees %q is never tried", s, e)
			}
		}
	}
}
