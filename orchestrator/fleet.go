package orchestrator

import (
	"context"
	"sync"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/core"
)

// fleetRuns is what the core runs beside the tasks while it runs: a runner for each
// running batch (batchrun.go) and the schedules' clock (schedrun.go). It starts
// once the core serves (Open alone, lead in a group) and stops with it; what it
// does is kept in the task store, so the next core picks it up.
type fleetRuns struct {
	mu     sync.Mutex
	ctx    context.Context // nil while stopped
	cancel context.CancelFunc
	// batches wakes each running batch's runner when one of its tasks ends.
	batches map[string]chan struct{}
	// core is the core the runners run beside; they end before it.
	core *core.Core
	// schedules wakes the schedules' clock when a schedule changes.
	schedules chan struct{}
	// changed tells the batch event streams that a batch changed. It has a lock
	// of its own, so that no method of fleetRuns needs mu held to bump it.
	changed broadcast
}

// broadcast wakes all its waiters at once: wait returns a channel that the next
// bump closes. The zero value is ready.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{} // nil while nobody waits
}

// wait returns a channel closed at the next bump.
func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// bump wakes the waiters.
func (b *broadcast) bump() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// startFleet starts the batch runners of the running batches and the schedules'
// clock, and sends the webhook deliveries kept from before.
func (o *Orchestrator) startFleet(c *core.Core) error {
	f := &o.fleet
	f.mu.Lock()
	if f.ctx != nil {
		f.mu.Unlock()
		return nil
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.core = c
	f.batches, f.schedules = map[string]chan struct{}{}, make(chan struct{}, 1)
	f.mu.Unlock()
	o.restoreDeliveries()
	running, err := o.runningBatches()
	if err != nil {
		return err
	}
	for _, b := range running {
		o.fleet.batchMade(o, b)
	}
	ctx, wake := f.ctx, f.schedules
	o.goCore(func() { o.runSchedules(ctx, wake) })
	return nil
}

// stopFleet stops the runners; they end on their own, soon.
func (o *Orchestrator) stopFleet() {
	f := &o.fleet
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cancel != nil {
		f.cancel()
	}
	f.ctx, f.cancel, f.batches, f.core = nil, nil, nil, nil
}

// goCore runs fn on a goroutine the running core's Close waits for, unless it
// is closing.
func (o *Orchestrator) goCore(fn func()) bool {
	o.fleet.mu.Lock()
	c := o.fleet.core
	o.fleet.mu.Unlock()
	return c != nil && c.Go(fn)
}

// batchMade starts b's runner, unless the fleet is stopped or b has one.
func (f *fleetRuns) batchMade(o *Orchestrator, b *api.Batch) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctx == nil || f.batches[b.ID] != nil {
		return
	}
	wake := make(chan struct{}, 1)
	f.batches[b.ID] = wake
	ctx := f.ctx
	if !f.core.Go(func() { o.runBatch(ctx, b, wake) }) {
		delete(f.batches, b.ID)
	}
}

// batchEnded forgets the runner of batch id.
func (f *fleetRuns) batchEnded(id string) {
	f.mu.Lock()
	delete(f.batches, id)
	f.mu.Unlock()
	f.changed.bump()
}

// taskEnded wakes the runner of batch id, one of whose tasks ended. It never
// waits: the loop calls it.
func (f *fleetRuns) taskEnded(id string) {
	f.mu.Lock()
	if wake := f.batches[id]; wake != nil {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	f.mu.Unlock()
	f.changed.bump()
}

// read takes the core's events: a batch's task that ended wakes its runner.
func (f *fleetRuns) read(ev core.Event) {
	if ev.Kind == core.TaskEnded && ev.Task.BatchID != "" {
		f.taskEnded(ev.Task.BatchID)
	}
}

// schedulesChanged wakes the schedules' clock.
func (f *fleetRuns) schedulesChanged() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case f.schedules <- struct{}{}:
	default:
	}
}

// changes returns a channel closed at the next change of a batch.
func (f *fleetRuns) changes() <-chan struct{} { return f.changed.wait() }

// bump tells the batch event streams that a batch changed.
func (f *fleetRuns) bump() { f.changed.bump() }
