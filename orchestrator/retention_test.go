package orchestrator_test

import (
	"errors"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestFinishedTaskIsGoneAfterRetention: a finished task is kept for the retention,
// then is gone from the store (Task answers ErrNotFound, the list leaves it out),
// while a task still running meanwhile stays.
func TestFinishedTaskIsGoneAfterRetention(t *testing.T) {
	e := newEnv(t, "code-1")
	// Badger expires keys on whole seconds: 2s keeps the task at least 1s.
	e.cfg.Retention = 2 * time.Second
	o, a := e.openWithAgent("code-1", 4)
	done := submit(t, o, nil)
	w := a.next()
	a.result(w, envelope.ResultSuccess, 0, "ok", nil)
	if final := waitFinal(t, o, done.ID); final.State != task.StateSucceeded {
		t.Fatalf("got %s", final.State)
	}
	running := submit(t, o, nil)
	w2 := a.next()
	a.ack(w2)
	if _, err := o.Task(done.ID); err != nil {
		t.Fatalf("finished task gone at once: %v", err)
	}

	deadline := time.Now().Add(3 * e.cfg.Retention)
	for {
		_, err := o.Task(done.ID)
		if errors.Is(err, task.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatalf("Task: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("finished task still there %s after it ended, with retention %s", 3*e.cfg.Retention, e.cfg.Retention)
		}
		time.Sleep(50 * time.Millisecond) // polling for the expiry, within the deadline
	}
	list, err := o.Tasks(api.ListOptions{})
	if err != nil {
		t.Fatalf("Tasks: %v", err)
	}
	if len(list) != 1 || list[0].ID != running.ID {
		var ids []string
		for _, tk := range list {
			ids = append(ids, tk.ID)
		}
		t.Fatalf("listed %v, want only the running task %s", ids, running.ID)
	}
	a.result(w2, envelope.ResultSuccess, 0, "ok", nil)
	waitFinal(t, o, running.ID)
}
