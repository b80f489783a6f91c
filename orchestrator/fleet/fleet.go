package fleet

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/chiffon-dev/chiffon/api"
)

// Params is what a Fleet is given.
type Params struct {
	// Core makes and reads the tasks.
	Core Core
	// Store keeps the batches and schedules.
	Store Records
	// Log receives the runners' logs; nil means slog.Default().
	Log *slog.Logger
	// Hooks takes the webhook events of batches; nil when there are no
	// receivers.
	Hooks Hooks
	// TooLarge is what Core.CheckSize's refusals for size are (errors.Is): a
	// schedule's batch refused so is skipped, not tried again.
	TooLarge error
	// RegisterGrace is how long a new batch waits for its targets whose agents
	// are configured and have not registered (api.TargetRegistering); 0: they
	// are unknown at once.
	RegisterGrace time.Duration
	// Workflows are the workflows of the orchestrator's config, each checked
	// (workflow.Check); the API cannot change them.
	Workflows []api.WorkflowSpec
	// ConfiguredAt is when the config was read: its workflows' UpdatedAt.
	ConfiguredAt time.Time
}

// Hooks hands events to the webhook receivers (webhook.Dispatcher).
type Hooks interface {
	// Send sends event (webhook.BatchFinished, webhook.ApprovalRequested) with
	// data, the batch, without waiting for its delivery.
	Send(event string, data any)
}

// noHooks is the Hooks of a fleet without webhook receivers.
type noHooks struct{}

// Send sends nothing.
func (noHooks) Send(string, any) {}

// Fleet runs the batches and the schedules beside the orchestrator's core: a
// runner for each running batch (batchrun.go) and the schedules' clock
// (schedrun.go), from Start to Stop, which the core calls while it runs (alone
// from Open to Close, in a group while it leads). What they do is kept in the
// store, so the next Start, here or on another orchestrator, picks it up. The
// batch and schedule calls (CreateBatch, AddSchedule...) work stopped too.
type Fleet struct {
	core  Core
	st    Records
	log   *slog.Logger
	hooks Hooks
	large error
	grace time.Duration
	// configured are the config's workflows, by name.
	configured map[string]*api.Workflow

	// schedMu orders the changes made here to schedules, batchMu those to
	// batches, runMu those to workflow runs (runners and calls alike).
	schedMu, batchMu, runMu sync.Mutex

	mu  sync.Mutex
	cur *term // nil while stopped
	// changed tells the batch event streams that a batch changed. It has a
	// lock of its own, so that nothing needs mu held to bump it.
	changed broadcast
}

// term is one run of the fleet, from Start to Stop.
type term struct {
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts the runners and the clock; Stop waits for them.
	wg sync.WaitGroup
	// batches wakes each running batch's runner when one of its tasks ends.
	batches map[string]chan struct{}
	// runs wakes each running workflow run's runner when a step's task or
	// batch ends, or a call changed the run.
	runs map[string]chan struct{}
	// schedules wakes the schedules' clock when a schedule changes.
	schedules chan struct{}
}

// New returns a stopped Fleet.
func New(p Params) *Fleet {
	log := p.Log
	if log == nil {
		log = slog.Default()
	}
	hooks := p.Hooks
	if hooks == nil {
		hooks = noHooks{}
	}
	f := &Fleet{core: p.Core, st: p.Store, log: log, hooks: hooks, large: p.TooLarge, grace: p.RegisterGrace,
		configured: map[string]*api.Workflow{}}
	for _, spec := range p.Workflows {
		f.configured[spec.Name] = &api.Workflow{WorkflowSpec: spec, Source: api.WorkflowFromConfig, UpdatedAt: p.ConfiguredAt}
	}
	return f
}

// Start starts a runner for each running batch and the schedules' clock. A
// started Fleet starts nothing more.
func (f *Fleet) Start() error {
	f.mu.Lock()
	if f.cur != nil {
		f.mu.Unlock()
		return nil
	}
	t := &term{batches: map[string]chan struct{}{}, runs: map[string]chan struct{}{}, schedules: make(chan struct{}, 1)}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	f.cur = t
	f.mu.Unlock()
	running, err := f.runningBatches()
	if err != nil {
		return err
	}
	for _, b := range running {
		f.batchMade(b)
	}
	runs, err := f.runningRuns()
	if err != nil {
		return err
	}
	for _, r := range runs {
		f.runMade(r.ID)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur == t { // not stopped meanwhile
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			f.runSchedules(t.ctx, t.schedules)
		}()
	}
	return nil
}

// Stop stops the runners and the clock, and returns once they have ended.
func (f *Fleet) Stop() {
	f.mu.Lock()
	t := f.cur
	f.cur = nil
	f.mu.Unlock()
	if t != nil {
		t.cancel()
		t.wg.Wait()
	}
}

// TaskEnded wakes the runner of batch id, one of whose tasks ended, and tells
// the batch event streams. It never waits: the core's loop calls it.
func (f *Fleet) TaskEnded(id string) {
	f.mu.Lock()
	if t := f.cur; t != nil {
		select {
		case t.batches[id] <- struct{}{}:
		default:
		}
	}
	f.mu.Unlock()
	f.changed.bump()
}

// AgentOnline wakes the runners of the running batches: one may wait for
// agent id, registered and online now. It never waits: the core's loop calls
// it.
func (f *Fleet) AgentOnline(string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.cur; t != nil {
		for _, wake := range t.batches {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
}

// Changes returns a channel closed at the next change of a batch.
func (f *Fleet) Changes() <-chan struct{} { return f.changed.wait() }

// batchMade starts b's runner, unless the fleet is stopped or b has one.
func (f *Fleet) batchMade(b *api.Batch) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.cur
	if t == nil || t.batches[b.ID] != nil {
		return
	}
	wake := make(chan struct{}, 1)
	t.batches[b.ID] = wake
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer f.batchEnded(t, b.ID)
		f.runBatch(t.ctx, b, wake)
	}()
}

// batchEnded forgets the runner of batch id in term t.
func (f *Fleet) batchEnded(t *term, id string) {
	f.mu.Lock()
	delete(t.batches, id)
	f.mu.Unlock()
	f.changed.bump()
}

// runMade starts run id's runner, unless the fleet is stopped or it has one.
func (f *Fleet) runMade(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.cur
	if t == nil || t.runs[id] != nil {
		return
	}
	wake := make(chan struct{}, 1)
	t.runs[id] = wake
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer f.runEnded(t, id)
		f.runWorkflow(t.ctx, id, wake)
	}()
}

// runEnded forgets the runner of run id in term t.
func (f *Fleet) runEnded(t *term, id string) {
	f.mu.Lock()
	delete(t.runs, id)
	f.mu.Unlock()
	f.changed.bump()
}

// RunChanged wakes the runner of workflow run id: a step's task or batch
// ended, or a call changed the run. It never waits: the core's loop calls it.
func (f *Fleet) RunChanged(id string) {
	f.mu.Lock()
	if t := f.cur; t != nil {
		select {
		case t.runs[id] <- struct{}{}:
		default:
		}
	}
	f.mu.Unlock()
	f.changed.bump()
}

// schedulesChanged wakes the schedules' clock.
func (f *Fleet) schedulesChanged() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.cur; t != nil {
		select {
		case t.schedules <- struct{}{}:
		default:
		}
	}
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
