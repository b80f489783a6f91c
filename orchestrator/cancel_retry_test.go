package orchestrator_test

import (
	"context"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestCancelDuringRetryWaitTellsTheAgentThatMayRunIt: a task waiting for its retry
// after its agent accepted it is cancelled, and that agent, which may still run it,
// gets the cancel on its control subject.
func TestCancelDuringRetryWaitTellsTheAgentThatMayRunIt(t *testing.T) {
	e := newEnv(t, "code-1")
	e.cfg.Retry.Initial, e.cfg.Retry.Max = time.Minute, time.Minute // the retry waits while we cancel
	o, a := e.openWithAgent("code-1", 1)
	tsk := submit(t, o, nil)
	w := a.next()
	a.ack(w)
	a.fail(w, errcodes.NewAgentUnavailable("lost its worker", "code-1", nil))
	waitFor(t, "the retry wait", func() bool {
		got, err := o.Task(tsk.ID)
		return err == nil && got.State == task.StatePending && len(got.Retries) == 1
	})

	if _, err := o.Cancel(context.Background(), tsk.ID, "not needed"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	for {
		c := a.nextControl()
		if cancel, ok := c.Payload.(*envelope.Cancel); ok {
			if cancel.TaskID != tsk.ID || c.RequestID != w.env.RequestID || cancel.Reason != "not needed" {
				t.Fatalf("cancel %+v for request %s, want task %s request %s", cancel, c.RequestID, tsk.ID, w.env.RequestID)
			}
			break
		}
	}
	if final := waitFinal(t, o, tsk.ID); final.State != task.StateCancelled {
		t.Fatalf("task ended %s, want cancelled", final.State)
	}
}
