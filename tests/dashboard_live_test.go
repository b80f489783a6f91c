package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chromedp/chromedp"
)

// itemsWorkType works through four items: for each it reports a step "item
// i/4", prints 200 lines, and waits for the file go-i in the folder %[1]s,
// which the test makes when it has seen what it checks; then it prints "the
// last line".
const itemsWorkType = `  items:
    description: Works through four items, each when its go file appears.
    shell: |
      for i in 1 2 3 4; do
        echo "::step item $i/4"
        n=1; while [ $n -le 200 ]; do echo "item $i line $n"; n=$((n+1)); done
        while [ ! -e "%[1]s/go-$i" ]; do sleep 0.05; done
      done
      echo "the last line"
    env: [PATH]
    timeout: 2m
    schema: {type: object}
`

// outputAtBottom is true when the output box shows its last line: scrolled to
// its end.
const outputAtBottom = `(function () {
	const out = document.getElementById("output");
	return out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
})()`

// itemSteps are the items' steps the page lists (the agent's acceptance is a
// step too), comma-separated.
const itemSteps = `Array.from(document.querySelectorAll("#steps .step-name")).map(e => e.textContent).filter(s => s.startsWith("item")).join(",")`

// A running task's page follows it without a reload: the steps list gains
// each step as the task reports it, the time so far ticks, and the output box
// stays at its last line as output comes, unless the reader scrolled up (then
// it stays where they left it, until they are back at the bottom). The page
// that the end reloads shows the output's last line too.
func TestDashboardTaskPageFollowsStepsTimeAndOutput(t *testing.T) {
	chromiumPath(t)
	gate := t.TempDir()
	c := newCluster(t, 1)
	c.extraWorkTypes = fmt.Sprintf(itemsWorkType, gate)
	c.writeAgentConfig("code-1")
	c.start()
	d := openDash(t, "http://"+c.httpAddr+"/", c.secretsDir())
	d.login(d.token("api.token"))
	ctx := context.Background()
	tk, err := d.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "items"})
	if err != nil {
		t.Fatal(err)
	}
	var firstItem int64
	for n := 1; n <= 200; n++ {
		firstItem += int64(len(fmt.Sprintf("item 1 line %d\n", n)))
	}
	c.waitFor("the first item's output", 30*time.Second, func() bool {
		got, err := d.client.Get(ctx, tk.ID)
		return err == nil && got.OutputBytes >= firstItem
	})
	open := func(i int) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(gate, fmt.Sprintf("go-%d", i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	d.do("the task's page", chromedp.Navigate(d.base+"tasks/"+tk.ID), chromedp.WaitVisible(chromedp.CSS("#steps li")))
	_ = eval[bool](d, `window.sameLoad = true`)
	if !eval[bool](d, `document.getElementById("output").scrollHeight > document.getElementById("output").clientHeight + 100`) {
		t.Fatalf("the output box does not scroll: the test proves nothing")
	}
	d.waitJS("the output box at its last line on load", outputAtBottom, 10*time.Second)
	took := eval[string](d, `document.getElementById("elapsed").textContent`)
	d.waitJS("the time so far ticking", `window.sameLoad && document.getElementById("elapsed").textContent !== `+jsString(took), 10*time.Second)

	open(1)
	d.waitJS("step 2 in the list, live", `window.sameLoad && `+itemSteps+` === "item 1/4,item 2/4" &&
		document.getElementById("output").textContent.includes("item 2 line 200")`, 30*time.Second)
	d.shot("live-step-2")
	if !eval[bool](d, outputAtBottom) {
		t.Errorf("the output box left its last line as output came: %s", scrollState(d))
	}

	// The reader scrolls up: the box stays there as output comes.
	_ = eval[bool](d, `(function () {
		const out = document.getElementById("output");
		out.addEventListener("scroll", function () { window.scrolled = (window.scrolled || 0) + 1; });
		out.scrollTop = 0;
		return true;
	})()`)
	d.waitJS("the scroll up", `window.scrolled >= 1`, 10*time.Second)
	open(2)
	d.waitJS("step 3's output, live", `window.sameLoad && document.getElementById("output").textContent.includes("item 3 line 200")`, 30*time.Second)
	if top := eval[float64](d, `document.getElementById("output").scrollTop`); top > 4 {
		t.Errorf("the output box scrolled to %.0f, away from where the reader left it (0)", top)
	}

	// Back at the bottom, it follows again.
	_ = eval[bool](d, `(function () { window.scrolled = 0; const out = document.getElementById("output"); out.scrollTop = out.scrollHeight; return true; })()`)
	d.waitJS("the scroll down", `window.scrolled >= 1`, 10*time.Second)
	open(3)
	d.waitJS("step 4's output, live", `window.sameLoad && document.getElementById("output").textContent.includes("item 4 line 200")`, 30*time.Second)
	if !eval[bool](d, outputAtBottom) {
		t.Errorf("back at the bottom, the output box does not follow: %s", scrollState(d))
	}
	if steps := eval[string](d, itemSteps); steps != "item 1/4,item 2/4,item 3/4,item 4/4" {
		t.Errorf("the steps list, live: %s", steps)
	}

	open(4)
	d.waitJS("the finished task, reloaded", `!window.sameLoad && document.getElementById("task").dataset.final === "true" &&
		document.getElementById("result") !== null`, 30*time.Second)
	d.waitJS("the output box at its last line, reloaded", outputAtBottom, 10*time.Second)
	d.shot("live-done")
	if out := eval[string](d, `document.getElementById("output").textContent`); !strings.HasSuffix(strings.TrimSpace(out), "the last line") {
		t.Errorf("the output ends with %q", out[max(0, len(out)-40):])
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// scrollState says where the output box is scrolled, for a failure.
func scrollState(d *dash) string {
	return eval[string](d, `(function () { const o = document.getElementById("output");
		return "scrollTop " + o.scrollTop + ", clientHeight " + o.clientHeight + ", scrollHeight " + o.scrollHeight; })()`)
}

// An operator adds a schedule from the Schedules page's form, typed inputs and
// all, and the API lists it with its parameters typed; edited on the page, the
// API has the new cron and parameters. The form fits a phone. A batch that waits for approval is in
// the home page's approvals box.
func TestDashboardAddsAScheduleAndListsABatchAwaitingApproval(t *testing.T) {
	chromiumPath(t)
	c := newCluster(t, 1)
	c.extraWorkTypes = greetWorkType
	c.orchExtra = "work_types: {count: {approval: required}}\napproval: {expires_after: 1h}"
	c.writeOrchConfig()
	c.writeAgentConfig("code-1")
	c.start()
	d := openDash(t, "http://"+c.httpAddr+"/", c.secretsDir())
	d.login(d.token("api.token"))
	ctx := context.Background()
	c.waitFor("code-1 online", 30*time.Second, func() bool {
		agents, err := d.client.Agents(ctx)
		return err == nil && slices.ContainsFunc(agents, func(a api.AgentInfo) bool { return a.ID == "code-1" && a.State == "online" })
	})

	d.do("the new schedule's form", chromedp.Navigate(d.base+"schedules"), chromedp.WaitVisible(chromedp.CSS("#new-schedule")),
		chromedp.Click(chromedp.CSS("#new-schedule")), chromedp.WaitVisible(chromedp.CSS("#sched-name")),
		chromedp.SendKeys(chromedp.CSS("#sched-name"), "greet-nightly"),
		chromedp.SendKeys(chromedp.CSS("#sched-cron"), "0 3 * * *"),
		chromedp.SendKeys(chromedp.CSS("#sched-tz"), "Europe/Paris"),
		chromedp.SetValue(chromedp.CSS("#sched-catch-up"), "latest"),
		chromedp.Click(chromedp.CSS("#sched-paused")))
	_ = eval[bool](d, `(function () {
		const pick = document.getElementById("target");
		pick.value = "code/greet";
		pick.dispatchEvent(new Event("change"));
		return true;
	})()`)
	d.waitJS("the work type's inputs", `document.getElementById("param-n") !== null`, 20*time.Second)
	d.do("fill in the task", chromedp.SetValue(chromedp.CSS("#param-n"), "4"),
		chromedp.SendKeys(chromedp.CSS("#param-name"), "Ada"), chromedp.Click(chromedp.CSS("#param-loud")))
	d.shot("schedule-new")
	d.do("add it", chromedp.Click(chromedp.CSS("#save-schedule")))
	d.waitJS("the schedule in the list", `location.pathname === "/schedules" && document.getElementById("schedule-greet-nightly") !== null`, 20*time.Second)
	d.shot("schedule-added")
	s, err := d.client.Schedule(ctx, "greet-nightly")
	if err != nil {
		t.Fatal(err)
	}
	assertSchedule(t, s, "0 3 * * *", `{"level":"low","loud":true,"n":4,"name":"Ada"}`)
	if s.TZ != "Europe/Paris" || s.CatchUp != api.CatchUpLatest || !s.Paused {
		t.Errorf("the schedule's tz, catch-up, paused: %q %q %v", s.TZ, s.CatchUp, s.Paused)
	}

	d.do("edit it", chromedp.Click(chromedp.CSS("#schedule-greet-nightly button.edit")), chromedp.WaitVisible(chromedp.CSS("#replace-note")),
		chromedp.SetValue(chromedp.CSS("#sched-cron"), "30 4 * * *"), chromedp.SetValue(chromedp.CSS("#param-n"), "7"))
	d.shot("schedule-edit")
	d.do("save it", chromedp.Click(chromedp.CSS("#save-schedule")))
	d.waitJS("back at the list", `location.pathname === "/schedules" && document.getElementById("schedule-greet-nightly") !== null`, 20*time.Second)
	if s, err = d.client.Schedule(ctx, "greet-nightly"); err != nil {
		t.Fatal(err)
	}
	assertSchedule(t, s, "30 4 * * *", `{"level":"low","loud":true,"n":7,"name":"Ada"}`)
	d.do("the form on a phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(d.base+"schedules/new?target=code/greet"),
		chromedp.WaitVisible(chromedp.CSS("#param-n")))
	d.shot("schedule-new-390")
	if w := eval[int](d, "document.documentElement.scrollWidth"); w > 390 {
		t.Errorf("on a 390 px screen the schedule form is %d px wide", w)
	}
	d.do("back to a wide screen", chromedp.EmulateViewport(1280, 900))

	b, err := d.client.CreateBatch(ctx, api.BatchRequest{ToAgent: "code", WorkType: "count", Parameters: map[string]any{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if b.State != api.BatchAwaitingApproval {
		t.Fatalf("the batch is %s, want awaiting_approval", b.State)
	}
	row := `document.querySelector('#approvals-batches tr[data-batch="` + b.ID + `"]')`
	d.do("the home page", chromedp.Navigate(d.base), chromedp.WaitVisible(chromedp.CSS("#counters")))
	d.waitJS("the batch in the approvals box", row+` !== null && `+row+`.querySelector('a[href$="/batches/`+b.ID+`"]') !== null`, 20*time.Second)
	d.shot("approvals-batch")
	if n := eval[string](d, `document.getElementById("approvals-count").textContent`); n != "1" {
		t.Errorf("the approvals box counts %s, want 1 (the batch; its task is not one of its own)", n)
	}
	tasks, err := d.client.List(ctx, api.ListOptions{State: task.StateAwaitingApproval})
	if err != nil || len(tasks) != 0 {
		t.Errorf("tasks awaiting approval apart from the batch: %d, %v", len(tasks), err)
	}
}

// assertSchedule checks a schedule's cron and its task's parameters, as JSON.
func assertSchedule(t *testing.T, s *api.Schedule, cron, params string) {
	t.Helper()
	if s.Task == nil {
		t.Fatalf("schedule %s makes no task: %+v", s.Name, s)
	}
	got, _ := json.Marshal(s.Task.Parameters)
	if s.Cron != cron || string(got) != params || s.Task.ToAgent != "code" || s.Task.WorkType != "greet" {
		t.Errorf("schedule %s: cron %q, task %s/%s %s; want %q, code/greet %s", s.Name, s.Cron, s.Task.ToAgent, s.Task.WorkType, got, cron, params)
	}
}
