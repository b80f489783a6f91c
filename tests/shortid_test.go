package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// submitSameMinute submits tasks with submit until two submitted one after the
// other have ids that begin with the same task.MinPrefixLen characters, as the
// ids of tasks of the same minute do, and returns those two.
func submitSameMinute(t *testing.T, submit func() *task.Task) (*task.Task, *task.Task) {
	t.Helper()
	prev := submit()
	for range 3 {
		tk := submit()
		if tk.ID[:task.MinPrefixLen] == prev.ID[:task.MinPrefixLen] {
			return prev, tk
		}
		prev = tk
	}
	t.Fatalf("no two tasks in a row had ids that begin alike: %s", prev.ID)
	return nil, nil
}

// uniqueIDPrefix is the shortest beginning of a that b does not share, of at
// least task.MinPrefixLen characters.
func uniqueIDPrefix(a, b string) string {
	n := 0
	for n < len(a) && a[n] == b[n] {
		n++
	}
	return a[:max(n+1, task.MinPrefixLen)]
}

// TestShortIDsAcrossProcesses: the built CLI lists two tasks of the same
// minute by short ids that differ, and names them by short id or prefix:
// `chiffon task <prefix>` shows the task, `chiffon approve <prefix>` runs it
// (once, by the ledger), `chiffon cancel <short id>` cancels the other, and a
// prefix both share is refused, naming both.
func TestShortIDsAcrossProcesses(t *testing.T) {
	c := newCluster(t, 1)
	c.orchExtra = "work_types: {count: {approval: required}}"
	c.writeOrchConfig()
	c.start()
	cli := func(args ...string) result {
		return chiffonBinary(t, c.bin, append(args, "--server", "http://"+c.httpAddr, "--api-token-file", c.secret("api.token"))...)
	}
	first, second := submitSameMinute(t, func() *task.Task {
		tk, err := c.client.Submit(fleetCtx(t), api.SubmitRequest{ToAgent: "code", WorkType: "count", Parameters: map[string]any{"n": 1}})
		if err != nil {
			t.Fatal(err)
		}
		return tk
	})
	short1, short2 := task.ShortID(first.ID), task.ShortID(second.ID)

	listed := cli("tasks")
	if listed.code != 0 || !strings.Contains(listed.stdout, short1) || !strings.Contains(listed.stdout, short2) ||
		strings.Contains(listed.stdout, first.ID) || short1 == short2 {
		t.Fatalf("chiffon tasks: exit %d, want short ids %s and %s:\n%s%s", listed.code, short1, short2, listed.stdout, listed.stderr)
	}
	prefix := uniqueIDPrefix(first.ID, second.ID)
	if shown := cli("task", prefix); shown.code != 0 || !strings.Contains(shown.stdout, first.ID) {
		t.Fatalf("chiffon task %s: exit %d\n%s%s", prefix, shown.code, shown.stdout, shown.stderr)
	}
	shared := first.ID[:task.MinPrefixLen]
	if amb := cli("task", shared); amb.code != 1 || !strings.Contains(amb.stderr, first.ID) ||
		!strings.Contains(amb.stderr, second.ID) || !strings.Contains(amb.stderr, "HTTP 409") {
		t.Fatalf("chiffon task %s (two tasks): exit %d, stderr %s", shared, amb.code, amb.stderr)
	}

	if res := cli("approve", prefix); res.code != 0 || !strings.Contains(res.stdout, first.ID) {
		t.Fatalf("chiffon approve %s: exit %d\n%s%s", prefix, res.code, res.stdout, res.stderr)
	}
	if res := cli("cancel", short2); res.code != 0 {
		t.Fatalf("chiffon cancel %s: exit %d\n%s%s", short2, res.code, res.stdout, res.stderr)
	}
	c.waitFor("both tasks to end", 30*time.Second, func() bool {
		a, errA := c.client.Get(fleetCtx(t), first.ID)
		b, errB := c.client.Get(fleetCtx(t), second.ID)
		return errA == nil && errB == nil && a.State == task.StateSucceeded && b.State == task.StateCancelled
	})
	if runs := c.runs(); len(runs) != 1 || runs[first.RequestID] != 1 {
		t.Fatalf("the ledger: %v, want %s once", runs, first.RequestID)
	}
}
