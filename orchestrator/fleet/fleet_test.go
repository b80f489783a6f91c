package fleet

import (
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
	"go.uber.org/goleak"
)

// fakeCore is a core that keeps the tasks it is given, each running until the
// test ends it, and matches every batch to the agents it names.
type fakeCore struct {
	mu      sync.Mutex
	tasks   map[string]*task.Task
	targets []api.BatchTarget
	made    chan task.Origin
	// entered, when set, hears of each SubmitAs, which then waits for gate.
	entered, gate chan struct{}
	// refuses, when set, is the agent whose catalogue refuses the requests
	// pinned to it.
	refuses string
}

func newFakeCore(agents ...string) *fakeCore {
	c := &fakeCore{tasks: map[string]*task.Task{}, made: make(chan task.Origin, 16)}
	for _, id := range agents {
		c.targets = append(c.targets, api.BatchTarget{AgentID: id})
	}
	return c
}

func (c *fakeCore) SubmitAs(req api.SubmitRequest, org task.Origin) (*task.Task, bool, error) {
	if c.entered != nil {
		c.entered <- struct{}{}
		<-c.gate
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.tasks[org.ID]; t != nil {
		cp := *t
		return &cp, false, nil
	}
	t := &task.Task{ID: org.ID, RequestID: org.RequestID, BatchID: org.BatchID, WorkflowRun: org.WorkflowRun,
		State: task.StateRunning, ToAgent: req.ToAgent, WorkType: req.WorkType, Parameters: req.Parameters}
	c.tasks[org.ID] = t
	c.made <- org
	cp := *t
	return &cp, true, nil
}

func (c *fakeCore) TasksByID(ids []string) (map[string]*task.Task, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]*task.Task{}
	for _, id := range ids {
		if t := c.tasks[id]; t != nil {
			cp := *t
			out[id] = &cp
		}
	}
	return out, nil
}

func (c *fakeCore) end(id string, s task.State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tasks[id].State = s
}

func (c *fakeCore) CheckSize(*api.SubmitRequest) error { return nil }

func (c *fakeCore) CheckWorkType(req *api.SubmitRequest) error {
	if req.Hints != nil && req.Hints.AgentID != "" && req.Hints.AgentID == c.refuses {
		return &api.WorkTypeError{Code: "invalid_parameter", Field: "parameters", Pointer: "/n", Message: "refused"}
	}
	return nil
}

func (c *fakeCore) BatchTargets(*api.BatchRequest) ([]api.BatchTarget, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]api.BatchTarget(nil), c.targets...), nil
}

// setTarget sets agent id's state as BatchTargets lists it.
func (c *fakeCore) setTarget(id, state string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.targets {
		if c.targets[i].AgentID == id {
			c.targets[i].State = state
		}
	}
}

func (c *fakeCore) Approval(*api.SubmitRequest, time.Time) *task.Approval { return nil }

// Cancel ends a task cancelled, as the core does one not sent yet.
func (c *fakeCore) Cancel(id, _ string) (*task.Task, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tasks[id]
	if t == nil {
		return nil, task.ErrNotFound
	}
	if t.State.Final() {
		return t, api.ErrFinished
	}
	t.State = task.StateCancelled
	cp := *t
	return &cp, nil
}

// hookFunc is a fleet.Hooks that calls itself.
type hookFunc func(event string, data any)

func (h hookFunc) Send(event string, data any) { h(event, data) }

// memRecords keeps records in memory, as task.Store's Records do.
type memRecords struct {
	mu   sync.Mutex
	recs map[string]map[string][]byte
}

func (m *memRecords) Record(kind, id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if data, ok := m.recs[kind][id]; ok {
		return data, nil
	}
	return nil, task.ErrNotFound
}

func (m *memRecords) Records(kind string) (map[string][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.recs[kind]), nil
}

func (m *memRecords) PutRecord(kind, id string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recs == nil {
		m.recs = map[string]map[string][]byte{}
	}
	if m.recs[kind] == nil {
		m.recs[kind] = map[string][]byte{}
	}
	if data == nil {
		delete(m.recs[kind], id)
	} else {
		m.recs[kind][id] = data
	}
	return nil
}

// TestBatchRunsOnTheCoreAndStopWaitsForItsRunners: a batch's runner makes its
// task through Core.SubmitAs with the id its record names, ends the batch once
// TaskEnded says the task ended, and Stop returns only once the runners and
// the clock are gone.
func TestBatchRunsOnTheCoreAndStopWaitsForItsRunners(t *testing.T) {
	defer goleak.VerifyNone(t)
	core := newFakeCore("code-1")
	events := make(chan string, 4)
	f := New(Params{Core: core, Store: &memRecords{}, Hooks: hookFunc(func(ev string, _ any) { events <- ev })})
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	b, err := f.CreateBatch(api.BatchRequest{ToAgent: envelope.Code, WorkType: "build"}, "tester")
	if err != nil {
		t.Fatal(err)
	}
	var org task.Origin
	select {
	case org = <-core.made:
	case <-time.After(10 * time.Second):
		t.Fatal("the runner made no task")
	}
	if org.ID != b.Targets[0].TaskID || org.BatchID != b.ID || org.By != "tester" {
		t.Fatalf("task made as %+v, want id %s of batch %s by tester", org, b.Targets[0].TaskID, b.ID)
	}
	changed := f.Changes()
	core.end(org.ID, task.StateSucceeded)
	f.TaskEnded(b.ID)
	select {
	case ev := <-events:
		if ev != webhook.BatchFinished {
			t.Fatalf("sent %s, want %s", ev, webhook.BatchFinished)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the batch did not finish")
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("Changes did not tell of the change")
	}
	got, err := f.GetBatch(b.ID)
	if err != nil || got.State != api.BatchSucceeded {
		t.Fatalf("GetBatch = %v, %v; want succeeded", got, err)
	}
	f.Stop()
	f.TaskEnded(b.ID) // stopped: it still returns at once
}

// TestStopWaitsForARunnerInTheCore: Stop returns only once a runner that is in
// a call of the core has come back from it and ended.
func TestStopWaitsForARunnerInTheCore(t *testing.T) {
	defer goleak.VerifyNone(t)
	core := newFakeCore("code-1")
	core.entered, core.gate = make(chan struct{}, 1), make(chan struct{})
	f := New(Params{Core: core, Store: &memRecords{}})
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateBatch(api.BatchRequest{ToAgent: envelope.Code, WorkType: "build"}, "tester"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-core.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the runner did not call the core")
	}
	stopped := make(chan struct{})
	go func() {
		f.Stop()
		close(stopped)
	}()
	// A Stop that does not wait returns at once: 100 ms shows it.
	select {
	case <-stopped:
		t.Fatal("Stop returned while a runner was in the core")
	case <-time.After(100 * time.Millisecond):
	}
	close(core.gate)
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return once the runner came back")
	}
}

// TestABatchOneOfWhoseAgentsRefusesItsParametersIsNotMade: the catalogue checks
// the task each target would get, pinned to it; one refusal refuses the batch,
// and nothing is stored or submitted.
func TestABatchOneOfWhoseAgentsRefusesItsParametersIsNotMade(t *testing.T) {
	defer goleak.VerifyNone(t)
	core := newFakeCore("code-1", "code-2")
	core.refuses = "code-2"
	recs := &memRecords{}
	f := New(Params{Core: core, Store: recs, Hooks: hookFunc(func(string, any) {})})
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	_, err := f.CreateBatch(api.BatchRequest{ToAgent: envelope.Code, WorkType: "build"}, "tester")
	var we *api.WorkTypeError
	if !errors.As(err, &we) || we.Pointer != "/n" {
		t.Fatalf("CreateBatch: %v, want the catalogue's refusal", err)
	}
	if bs, _ := f.Batches(0); len(bs) != 0 {
		t.Errorf("%d batches stored, want none", len(bs))
	}
	select {
	case org := <-core.made:
		t.Fatalf("task %s made for a refused batch", org.ID)
	default:
	}
}
