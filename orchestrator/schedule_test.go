package orchestrator_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
)

// everySecond is a schedule of an echo task every second.
func everySecond(name string, mode api.CatchUp) api.ScheduleSpec {
	return api.ScheduleSpec{Name: name, Cron: "* * * * * *", CatchUp: mode,
		Task: &api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"}}
}

// fireTimes lists the fire times of the tasks schedule name made, oldest first,
// and fails on two tasks of one fire time.
func fireTimes(t *testing.T, o *orchestrator.Orchestrator, name string) []time.Time {
	t.Helper()
	tasks, err := o.Tasks(api.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	seen := map[time.Time]string{}
	for _, tk := range tasks {
		if tk.Schedule != name {
			continue
		}
		if tk.FireTime == nil {
			t.Fatalf("task %s of schedule %s has no fire time", tk.ID, name)
		}
		at := tk.FireTime.UTC()
		if other, ok := seen[at]; ok {
			t.Fatalf("fire time %s made twice: tasks %s and %s", at.Format(time.RFC3339), other, tk.ID)
		}
		seen[at] = tk.ID
		out = append(out, at)
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// traceIDs maps each task's id to its trace id, which a task made anew (rather
// than found) would change.
func traceIDs(t *testing.T, o *orchestrator.Orchestrator) map[string]string {
	t.Helper()
	tasks, err := o.Tasks(api.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tk := range tasks {
		out[tk.ID] = tk.TraceID
	}
	return out
}

// TestScheduleCatchUp: ten firings missed before the clock started: catch_up none
// makes none of them, latest the last one, all every one; each firing due after
// the start is made once, however often the clock looks, and again after its
// record is lost (its task's id is derived from the schedule and the time).
func TestScheduleCatchUp(t *testing.T) {
	for _, tc := range []struct {
		mode   api.CatchUp
		missed []int // the missed seconds made, after creation
	}{
		{api.CatchUpNone, nil},
		{api.CatchUpLatest, []int{10}},
		{api.CatchUpAll, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			e := newEnv(t)
			e.cfg.Retry.MaxRetries = -1 // no agent: each task ends at once, in error
			o := e.open()
			orchestrator.StopFleet(o)
			s, err := o.AddSchedule(everySecond("nightly", tc.mode))
			if err != nil {
				t.Fatal(err)
			}
			base := s.CreatedAt.Truncate(time.Second)
			started := base.Add(10*time.Second + 500*time.Millisecond)
			next := orchestrator.FireDue(o, started, started)
			if want := base.Add(11 * time.Second); !next.Equal(want) {
				t.Fatalf("next look at %s, want %s", next, want)
			}
			var want []time.Time
			for _, n := range tc.missed {
				want = append(want, base.Add(time.Duration(n)*time.Second))
			}
			if got := fireTimes(t, o, "nightly"); !slices.Equal(got, want) {
				t.Fatalf("made %v, want %v", got, want)
			}
			later := started.Add(time.Second)
			for range 2 {
				orchestrator.FireDue(o, started, later)
			}
			// The tasks have ended and left the live ones: a firing made again
			// finds its task in the store.
			waitFor(t, "the tasks to end", func() bool {
				tasks, err := o.Tasks(api.ListOptions{})
				for _, tk := range tasks {
					if !tk.State.Final() {
						return false
					}
				}
				return err == nil
			})
			before := traceIDs(t, o)
			if err := orchestrator.ForgetFiring(o, "nightly"); err != nil {
				t.Fatal(err)
			}
			orchestrator.FireDue(o, started, later) // the missed ones are due again
			if after := traceIDs(t, o); !maps.Equal(after, before) {
				t.Fatalf("tasks made again: %v, were %v", after, before)
			}
			want = append(want, base.Add(11*time.Second))
			if got := fireTimes(t, o, "nightly"); !slices.Equal(got, want) {
				t.Fatalf("made %v, want %v", got, want)
			}
			got, err := o.GetSchedule("nightly")
			if err != nil || got.Last == nil || !got.Last.At.Equal(base.Add(11*time.Second)) {
				t.Fatalf("last firing %+v (%v), want at %s", got.Last, err, base.Add(11*time.Second))
			}
		})
	}
}

// TestScheduleFiresEverySecond: the clock fires an every-second schedule once a
// second with a task the agent runs; paused it fires nothing; a batch schedule
// makes a batch per firing.
func TestScheduleFiresEverySecond(t *testing.T) {
	e := newEnv(t, "code-1")
	o, a := e.openWithAgent("code-1", 8)
	stop := make(chan struct{})
	answered := make(chan struct{})
	t.Cleanup(func() { close(stop); <-answered })
	go func() {
		defer close(answered)
		for {
			select {
			case w := <-a.work:
				a.result(w, envelope.ResultSuccess, 0, "", nil)
			case <-stop:
				return
			}
		}
	}()
	if _, err := o.AddSchedule(everySecond("tick", "")); err != nil {
		t.Fatal(err)
	}
	var times []time.Time
	waitFor(t, "three firings", func() bool { times = fireTimes(t, o, "tick"); return len(times) >= 3 })
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d != time.Second {
			t.Fatalf("fire times %v: %s apart", times, d)
		}
	}
	if _, err := o.PauseSchedule("tick", true); err != nil {
		t.Fatal(err)
	}
	paused := len(fireTimes(t, o, "tick"))
	// Five seconds on, a paused schedule has made nothing (but the firing the
	// clock may have begun before the pause).
	orchestrator.FireDue(o, time.Now(), time.Now().Add(5*time.Second))
	if n := len(fireTimes(t, o, "tick")); n > paused+1 {
		t.Fatalf("%d firings while paused", n-paused)
	}
	if err := o.RemoveSchedule("tick"); err != nil {
		t.Fatal(err)
	}

	spec := api.ScheduleSpec{Name: "fleet", Cron: "@every 1s",
		Batch: &api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo"}}
	if _, err := o.AddSchedule(spec); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two batches", func() bool {
		bs, err := o.Batches(10)
		return err == nil && len(bs) >= 2 && bs[0].Schedule == "fleet" && bs[0].FireTime != nil
	})
}

// TestScheduleAPI: the API adds, lists, shows, pauses, resumes and removes
// schedules; it refuses a bad one naming the field, and a second of a name.
func TestScheduleAPI(t *testing.T) {
	e := newEnv(t)
	o := e.open()
	orchestrator.StopFleet(o)
	c := e.client(o)
	ctx := context.Background()
	task := &api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo"}
	for _, tc := range []struct {
		spec  api.ScheduleSpec
		field string
	}{
		{api.ScheduleSpec{Name: "Bad Name", Cron: "@daily", Task: task}, "name"},
		{api.ScheduleSpec{Name: "a", Cron: "61 * * * *", Task: task}, "cron"},
		{api.ScheduleSpec{Name: "a", Cron: "CRON_TZ=UTC 0 3 * * *", Task: task}, "cron"},
		{api.ScheduleSpec{Name: "a", Cron: "@daily", TZ: "Mars/Olympus", Task: task}, "tz"},
		{api.ScheduleSpec{Name: "a", Cron: "@daily", CatchUp: "some", Task: task}, "catch_up"},
		{api.ScheduleSpec{Name: "a", Cron: "@daily"}, "task"},
		{api.ScheduleSpec{Name: "a", Cron: "@daily", Task: &api.SubmitRequest{ToAgent: "x", WorkType: "echo"}}, "task.to_agent"},
		{api.ScheduleSpec{Name: "a", Cron: "@daily", Batch: &api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo", MaxParallel: -1}}, "batch.max_parallel"},
	} {
		_, err := c.AddSchedule(ctx, tc.spec)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != tc.field {
			t.Fatalf("%+v: %v, want a 400 naming %s", tc.spec, err, tc.field)
		}
	}
	s, err := c.AddSchedule(ctx, api.ScheduleSpec{Name: "backup", Cron: "0 3 * * *", TZ: "Europe/Paris", Task: task})
	if err != nil {
		t.Fatal(err)
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	if s.CatchUp != api.CatchUpNone || s.Next == nil || s.Next.In(paris).Hour() != 3 || s.Next.In(paris).Minute() != 0 {
		t.Fatalf("schedule %+v: want catch_up none and the next firing at 03:00 in Paris", s)
	}
	var ae *client.APIError
	if _, err := c.AddSchedule(ctx, api.ScheduleSpec{Name: "backup", Cron: "@daily", Task: task}); !errors.As(err, &ae) || ae.Status != http.StatusConflict {
		t.Fatalf("a second schedule of a name: %v", err)
	}
	if s, err = c.PauseSchedule(ctx, "backup", true); err != nil || !s.Paused || s.Next != nil {
		t.Fatalf("paused: %+v %v", s, err)
	}
	if s, err = c.PauseSchedule(ctx, "backup", false); err != nil || s.Paused || s.ResumedAt == nil || s.Next == nil {
		t.Fatalf("resumed: %+v %v", s, err)
	}
	list, err := c.Schedules(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "backup" {
		t.Fatalf("list %+v %v", list, err)
	}
	if err := c.RemoveSchedule(ctx, "backup"); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		func() error { _, err := c.Schedule(ctx, "backup"); return err }(),
		c.RemoveSchedule(ctx, "backup"),
		func() error { _, err := c.PauseSchedule(ctx, "backup", true); return err }(),
	} {
		if !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
			t.Fatalf("a removed schedule: %v", err)
		}
	}
}
