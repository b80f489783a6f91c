package fleet

import (
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"go.uber.org/goleak"
)

// madeTask waits for the runner's next SubmitAs and returns it.
func madeTask(t *testing.T, core *fakeCore) task.Origin {
	t.Helper()
	select {
	case org := <-core.made:
		return org
	case <-time.After(10 * time.Second):
		t.Fatal("the runner made no task")
		return task.Origin{}
	}
}

// TestARegisteringAgentGetsItsTaskWhenItComesOnline: a batch one of whose
// agents is registering makes the others' tasks at once and keeps that one
// registering; AgentOnline, once the core knows it, has its task made, long
// before the grace ends.
func TestARegisteringAgentGetsItsTaskWhenItComesOnline(t *testing.T) {
	defer goleak.VerifyNone(t)
	core := newFakeCore("code-1", "code-2")
	core.setTarget("code-2", api.TargetRegistering)
	f := New(Params{Core: core, Store: &memRecords{}, RegisterGrace: time.Hour})
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	b, err := f.CreateBatch(api.BatchRequest{ToAgent: envelope.Code, WorkType: "build"}, "tester")
	if err != nil {
		t.Fatal(err)
	}
	if b.RegisterUntil == nil || b.RegisterUntil.Sub(b.CreatedAt) != time.Hour || b.Targets[1].State != api.TargetRegistering {
		t.Fatalf("batch made with register_until %v, targets %+v", b.RegisterUntil, b.Targets)
	}
	if org := madeTask(t, core); org.ID != b.Targets[0].TaskID {
		t.Fatalf("made %s first, want code-1's %s", org.ID, b.Targets[0].TaskID)
	}
	core.setTarget("code-2", "") // registered and online
	f.AgentOnline("code-2")
	org := madeTask(t, core)
	got, err := f.GetBatch(b.ID)
	if err != nil || got.Targets[1].TaskID != org.ID || got.Targets[1].State != string(task.StateRunning) {
		t.Fatalf("code-2's target %+v (%v), want its task %s running", got.Targets[1], err, org.ID)
	}
}

// TestAGraceOfZeroMakesARegisteringAgentUnknown: without a grace, an agent not
// registered is unknown at once, as before the grace.
func TestAGraceOfZeroMakesARegisteringAgentUnknown(t *testing.T) {
	core := newFakeCore("code-1")
	core.setTarget("code-1", api.TargetRegistering)
	f := New(Params{Core: core, Store: &memRecords{}})
	b, err := f.CreateBatch(api.BatchRequest{ToAgent: envelope.Code, WorkType: "build"}, "tester")
	if err != nil || b.Targets[0].State != api.TargetUnknown || b.RegisterUntil != nil || b.State != api.BatchFailed {
		t.Fatalf("batch %+v (%v), want code-1 unknown and the batch failed", b, err)
	}
}

// TestALateAgentThatRefusesItsTaskGetsNone: an agent that registers late and
// whose catalogue refuses the batch's request is unsupported, and the batch
// ends failed, instead of trying to make the task forever.
func TestALateAgentThatRefusesItsTaskGetsNone(t *testing.T) {
	defer goleak.VerifyNone(t)
	core := newFakeCore("code-1")
	core.setTarget("code-1", api.TargetRegistering)
	core.refuses = "code-1"
	f := New(Params{Core: core, Store: &memRecords{}, RegisterGrace: time.Hour})
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	b, err := f.CreateBatch(api.BatchRequest{ToAgent: envelope.Code, WorkType: "build"}, "tester")
	if err != nil {
		t.Fatal(err)
	}
	core.setTarget("code-1", "")
	deadline := time.After(10 * time.Second)
	for {
		changed := f.Changes()
		f.AgentOnline("code-1")
		got, err := f.GetBatch(b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.FinishedAt != nil {
			if got.State != api.BatchFailed || got.Targets[0].State != api.TargetUnsupported {
				t.Fatalf("batch ended %s with %+v, want failed, code-1 unsupported", got.State, got.Targets)
			}
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the batch did not end: %+v", got.Targets)
		}
	}
}
