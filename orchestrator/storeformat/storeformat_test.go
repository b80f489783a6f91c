package storeformat_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/memstore"
	"github.com/chiffon-dev/chiffon/orchestrator/storeformat"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

var (
	created  = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	finished = created.Add(time.Minute)
)

// stepsTask is a task in state whose two steps were left as the first release
// left them: the first completed, the last running.
func stepsTask(id string, state task.State) *task.Task {
	t := &task.Task{ID: id, State: state, CreatedAt: created, Steps: []task.StepInfo{
		{Number: 0, Name: "accepted", Status: envelope.StatusStepCompleted, UpdatedAt: created},
		{Number: 1, Name: "sleeping", Status: "running", UpdatedAt: created},
	}}
	if state.Final() {
		t.FinishedAt = &finished
	}
	return t
}

func save(t *testing.T, st task.Store, tk *task.Task) {
	t.Helper()
	errc := make(chan error, 1)
	st.Save(&task.Write{ID: tk.ID, Task: tk}, func(err error) { errc <- err })
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func stepStatuses(t *testing.T, st task.Store, id string) string {
	t.Helper()
	tk, err := st.Task(id)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, step := range tk.Steps {
		s = append(s, step.Status)
	}
	return strings.Join(s, ",")
}

// TestUpgradeEndsTheStepsTheFirstReleaseLeftOpen: a store without a format
// record gets its finished tasks' open steps ended as each task ended, the
// unfinished ones untouched, and then the current format recorded, so that a
// second Upgrade changes nothing.
func TestUpgradeEndsTheStepsTheFirstReleaseLeftOpen(t *testing.T) {
	st := memstore.New(0)
	for _, tk := range []*task.Task{stepsTask("ok", task.StateSucceeded), stepsTask("bad", task.StateFailed),
		stepsTask("cut", task.StateCancelled), stepsTask("live", task.StateRunning)} {
		save(t, st, tk)
	}
	done, err := storeformat.Upgrade(st)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || !strings.Contains(done[0], "3 finished tasks") {
		t.Errorf("Upgrade said %q, want the 3 finished tasks it changed", done)
	}
	for id, want := range map[string]string{"ok": "step_completed,step_completed", "bad": "step_completed,failed",
		"cut": "step_completed,cancelled", "live": "step_completed,running"} {
		if got := stepStatuses(t, st, id); got != want {
			t.Errorf("task %s steps %s, want %s", id, got, want)
		}
	}
	if data, err := st.Record("meta", "format"); err != nil || string(data) != "2" {
		t.Errorf("format record %q, %v; want 2", data, err)
	}
	if done, err := storeformat.Upgrade(st); err != nil || done != nil {
		t.Errorf("a second Upgrade: %q, %v; want nothing done", done, err)
	}
}

// TestUpgradeOfANewStoreRecordsItsFormat: an empty store changes nothing but
// its format record.
func TestUpgradeOfANewStoreRecordsItsFormat(t *testing.T) {
	st := memstore.New(0)
	if done, err := storeformat.Upgrade(st); err != nil || done != nil {
		t.Fatalf("Upgrade of a new store: %q, %v", done, err)
	}
	if data, err := st.Record("meta", "format"); err != nil || string(data) != "2" {
		t.Errorf("format record %q, %v; want 2", data, err)
	}
}

// TestUpgradeRefusesWhatItCannotRead: a store of a newer format, or a record
// that is no format, is refused, the store untouched.
func TestUpgradeRefusesWhatItCannotRead(t *testing.T) {
	cases := []struct {
		record string
		tooNew bool
		want   string
	}{
		{"3", true, "format 3; this build reads up to 2"},
		{"two", false, `format record "two" is not a number`},
	}
	for _, tc := range cases {
		t.Run(tc.record, func(t *testing.T) {
			st := memstore.New(0)
			save(t, st, stepsTask("ok", task.StateSucceeded))
			if err := st.PutRecord("meta", "format", []byte(tc.record)); err != nil {
				t.Fatal(err)
			}
			_, err := storeformat.Upgrade(st)
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, storeformat.ErrTooNew) != tc.tooNew {
				t.Fatalf("Upgrade: %v; want %q (too new: %v)", err, tc.want, tc.tooNew)
			}
			if got := stepStatuses(t, st, "ok"); got != "step_completed,running" {
				t.Errorf("a refused store was changed: steps %s", got)
			}
		})
	}
}
