package tests

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// Batches and schedules across real processes: a broker, an orchestrator and
// real agents whose work records each run's request_id in a ledger (the runs
// file), so that a run made twice shows.

// fleetCtx bounds each API call of these tests.
func fleetCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitBatchEnd waits until batch id's end is stored and returns it.
func (c *cluster) waitBatchEnd(id string, d time.Duration) *api.Batch {
	c.t.Helper()
	var b *api.Batch
	c.waitFor("batch "+id+" to end", d, func() bool {
		var err error
		b, err = c.client.Batch(fleetCtx(c.t), id)
		return err == nil && b.FinishedAt != nil
	})
	return b
}

func batchTargets(b *api.Batch) map[string]string {
	out := map[string]string{}
	for _, t := range b.Targets {
		out[t.AgentID] = t.State
	}
	return out
}

// ranOnce fails unless every task's request_id is in the ledger at most once,
// and exactly once for a task that succeeded.
func (c *cluster) ranOnce(tasks []*task.Task) {
	c.t.Helper()
	runs := c.runs()
	for _, tk := range tasks {
		n := runs[tk.RequestID]
		if n > 1 || tk.State == task.StateSucceeded && n != 1 {
			c.t.Fatalf("task %s (%s on %s) ran %d times", tk.ID, tk.State, tk.AgentID, n)
		}
	}
}

// TestFleetBatchListsTheOfflineAgent: a batch over three agents, one of them
// killed before, runs on the two online ones once each and lists the third as
// offline; the batch fails (not every agent ran it), and `chiffon batch` shows
// it.
func TestFleetBatchListsTheOfflineAgent(t *testing.T) {
	c := newCluster(t, 3)
	c.start()
	c.agents["code-3"].kill(t)
	c.waitFor("code-3 offline", 30*time.Second, func() bool {
		a, ok := c.agentInfo("code-3")
		return ok && a.State == "offline"
	})
	b, err := c.client.CreateBatch(fleetCtx(t), api.BatchRequest{ToAgent: "code", WorkType: "count",
		Parameters: map[string]any{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	end := c.waitBatchEnd(b.ID, time.Minute)
	want := map[string]string{"code-1": "succeeded", "code-2": "succeeded", "code-3": api.TargetOffline}
	if got := batchTargets(end); !mapsEqual(got, want) {
		t.Fatalf("targets %v, want %v", got, want)
	}
	if end.State != api.BatchFailed {
		t.Fatalf("batch %s, want failed", end.State)
	}

	// The CLI: submit --all --wait lists the offline agent, shows a line per
	// agent, and exits non-zero.
	got := chiffonBinary(t, c.bin, "submit", "--server", "http://"+c.httpAddr, "--api-token-file", c.secret("api.token"),
		"--to", "code", "--work-type", "count", "--param", "n:=2", "--all", "--wait")
	if got.code == 0 || !strings.Contains(got.stderr, "code-3") || !strings.Contains(got.stderr+got.stdout, "offline") {
		t.Fatalf("submit --all --wait: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	for _, id := range []string{"code-1", "code-2"} {
		if !strings.Contains(got.stdout+got.stderr, id) {
			t.Fatalf("submit --all --wait shows no line for %s:\n%s%s", id, got.stdout, got.stderr)
		}
	}
	t.Logf("chiffon submit --all --wait (exit %d):\n%s%s", got.code, got.stdout, got.stderr)
	tasks, err := c.client.List(fleetCtx(t), api.ListOptions{Limit: 100})
	if err != nil || len(tasks) != 4 {
		t.Fatalf("%d tasks (%v), want 4: two batches over two agents", len(tasks), err)
	}
	c.ranOnce(tasks)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestFleetBatchStopsOnFailure: max_parallel 1 and stop_on_failure over three
// agents whose first fails: the other two never run it.
func TestFleetBatchStopsOnFailure(t *testing.T) {
	c := newCluster(t, 3)
	for _, id := range c.agentIDs {
		exit := 0
		if id == "code-1" {
			exit = 3
		}
		c.writeAgentConfigAs(id+".yaml", id, c.agentType, fmt.Sprintf(`  check:
    shell: 'echo "$CHIFFON_REQUEST_ID" >> "$RUNS_FILE"; exit %d'
    env: [PATH]
    set_env: {RUNS_FILE: %s}
`, exit, c.runsFile))
	}
	c.start()
	b, err := c.client.CreateBatch(fleetCtx(t), api.BatchRequest{ToAgent: "code", WorkType: "check",
		MaxParallel: 1, StopOnFailure: true})
	if err != nil {
		t.Fatal(err)
	}
	end := c.waitBatchEnd(b.ID, time.Minute)
	want := map[string]string{"code-1": "failed", "code-2": api.TargetSkipped, "code-3": api.TargetSkipped}
	if got := batchTargets(end); !mapsEqual(got, want) || end.State != api.BatchFailed {
		t.Fatalf("batch %s, targets %v; want failed, %v", end.State, got, want)
	}
	if runs := c.runs(); len(runs) != 1 {
		t.Fatalf("the ledger holds %d runs, want code-1's only", len(runs))
	}
}

// TestFleetBatchesUnderAnAgentKill: batches of tasks that sleep, over three
// agents two at a time, while one agent is SIGKILLed and comes back: every batch
// ends, with one task per agent online when it was made, and no task ran twice.
func TestFleetBatchesUnderAnAgentKill(t *testing.T) {
	c := newCluster(t, 3)
	c.start()
	const batches = 12
	var ids []string
	for i := range batches {
		switch i {
		case 3:
			c.agents["code-2"].kill(t)
		case 9: // two seconds later
			c.startAgent("code-2")
		}
		b, err := c.client.CreateBatch(fleetCtx(t), api.BatchRequest{ToAgent: "code", WorkType: "count",
			Parameters: map[string]any{"n": i, "sleep": "0.3"}, MaxParallel: 2})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, b.ID)
		time.Sleep(300 * time.Millisecond) // the workload is paced, to span the fault
	}
	made := 0
	for _, id := range ids {
		end := c.waitBatchEnd(id, 2*time.Minute)
		for _, tg := range end.Targets {
			if tg.TaskID != "" && tg.State != api.TargetSkipped {
				made++
			}
			if tg.State != api.TargetOffline && !task.State(tg.State).Final() {
				t.Fatalf("batch %s ended with %s %s", id, tg.AgentID, tg.State)
			}
		}
	}
	tasks, err := c.client.List(fleetCtx(t), api.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != made {
		t.Fatalf("%d tasks, the batches name %d", len(tasks), made)
	}
	perAgent := map[string]int{}
	for _, tk := range tasks {
		if !tk.State.Final() {
			t.Fatalf("task %s is %s", tk.ID, tk.State)
		}
		perAgent[tk.BatchID+"/"+tk.Hints.AgentID]++
	}
	for k, n := range perAgent {
		if n != 1 {
			t.Fatalf("%s has %d tasks", k, n)
		}
	}
	c.ranOnce(tasks)
	t.Logf("%d batches, %d tasks; %s", batches, len(tasks), c.evidence())
}

// clockStarted is the time the orchestrator's schedules' clock last started, from
// its log.
func (c *cluster) clockStarted() time.Time {
	c.t.Helper()
	re := regexp.MustCompile(`msg="schedules: clock started" .*\bat=(\S+)`)
	var at time.Time
	for _, line := range c.logs()["orchestrator.log"] {
		if m := re.FindStringSubmatch(line); m != nil {
			t, err := time.Parse(time.RFC3339Nano, m[1])
			if err != nil {
				c.t.Fatal(err)
			}
			at = t
		}
	}
	if at.IsZero() {
		c.t.Fatal("the orchestrator did not log its schedules' clock starting")
	}
	return at
}

// scheduleTasks lists the tasks of schedule name by fire time, failing on two
// of one fire time.
func (c *cluster) scheduleTasks(name string) map[time.Time]*task.Task {
	c.t.Helper()
	tasks, err := c.client.List(fleetCtx(c.t), api.ListOptions{Limit: 1000})
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[time.Time]*task.Task{}
	for _, tk := range tasks {
		if tk.Schedule != name {
			continue
		}
		at := tk.FireTime.UTC()
		if other := out[at]; other != nil {
			c.t.Fatalf("fire time %s made twice: %s and %s", at, other.ID, tk.ID)
		}
		out[at] = tk
	}
	return out
}

// TestFleetScheduleAcrossAnOrchestratorKill: a schedule every second fires once
// a second; the orchestrator is SIGKILLed and down for three seconds; after it
// comes back the schedule goes on, and the firings missed while it was down
// follow catch_up. Every firing made ran once (the ledger), none was made twice.
func TestFleetScheduleAcrossAnOrchestratorKill(t *testing.T) {
	for _, tc := range []struct {
		store string
		mode  api.CatchUp
	}{
		{orchestrator.StoreBadger, api.CatchUpNone},
		{orchestrator.StoreBadger, api.CatchUpLatest},
		{orchestrator.StoreBadger, api.CatchUpAll},
		{orchestrator.StoreJetStream, api.CatchUpAll},
	} {
		t.Run(tc.store+"/"+string(tc.mode), func(t *testing.T) {
			c := newCluster(t, 2)
			if tc.store != orchestrator.StoreBadger {
				c.store = tc.store
				c.writeOrchConfig()
			}
			c.start()
			_, err := c.client.AddSchedule(fleetCtx(t), api.ScheduleSpec{Name: "tick", Cron: "* * * * * *",
				CatchUp: tc.mode, Task: &api.SubmitRequest{ToAgent: "code", WorkType: "count",
					Parameters: map[string]any{"n": 7}}})
			if err != nil {
				t.Fatal(err)
			}
			c.waitFor("three firings", 30*time.Second, func() bool { return len(c.scheduleTasks("tick")) >= 3 })
			killedAt := time.Now()
			c.orch.kill(t)
			time.Sleep(3 * time.Second) // the fault is the passing of time
			c.startOrchestrator()
			started := c.clockStarted()
			if !started.After(killedAt) {
				t.Fatalf("the clock started at %s, before the kill at %s", started, killedAt)
			}
			after := 0
			c.waitFor("three firings after the restart", 30*time.Second, func() bool {
				after = 0
				for at := range c.scheduleTasks("tick") {
					if !at.Before(started) {
						after++
					}
				}
				return after >= 3
			})
			if err := c.client.RemoveSchedule(fleetCtx(t), "tick"); err != nil {
				t.Fatal(err)
			}
			var tasks map[time.Time]*task.Task
			c.waitFor("the schedule's tasks to end", time.Minute, func() bool {
				tasks = c.scheduleTasks("tick")
				for _, tk := range tasks {
					if !tk.State.Final() {
						return false
					}
				}
				return true
			})
			var times []time.Time
			var lastBefore time.Time
			all := make([]*task.Task, 0, len(tasks))
			for at, tk := range tasks {
				times = append(times, at)
				all = append(all, tk)
				if tk.CreatedAt.Before(killedAt) && at.After(lastBefore) {
					lastBefore = at
				}
				if tk.State != task.StateSucceeded {
					t.Fatalf("the firing at %s ended %s", at, tk.State)
				}
			}
			slices.SortFunc(times, time.Time.Compare)
			c.ranOnce(all)
			// The missed firings: after the last made before the kill, before the
			// clock started again.
			var missed, madeMissed []time.Time
			for at := lastBefore.Add(time.Second); at.Before(started); at = at.Add(time.Second) {
				missed = append(missed, at)
				if tasks[at] != nil {
					madeMissed = append(madeMissed, at)
				}
			}
			var want []time.Time
			switch tc.mode {
			case api.CatchUpLatest:
				want = missed[len(missed)-1:]
			case api.CatchUpAll:
				want = missed
			}
			if len(missed) < 2 || !slices.Equal(madeMissed, want) {
				t.Fatalf("missed %s; made of them %s, want %s", fmtTimes(missed), fmtTimes(madeMissed), fmtTimes(want))
			}
			// Every other second from the first firing to the last was made.
			for at := times[0]; !at.After(times[len(times)-1]); at = at.Add(time.Second) {
				if tasks[at] == nil && !slices.Contains(missed, at) {
					t.Fatalf("no firing at %s (fired: %s)", at, fmtTimes(times))
				}
			}
			t.Logf("%d firings; down from %s, clock again at %s; missed %d, made %d of them",
				len(times), killedAt.Format("15:04:05.000"), started.Format("15:04:05.000"), len(missed), len(madeMissed))
		})
	}
}

func fmtTimes(ts []time.Time) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.Format("15:04:05")
	}
	return "[" + strings.Join(s, " ") + "]"
}
