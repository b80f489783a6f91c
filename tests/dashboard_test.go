package tests

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// The dashboard's tests drive a real headless Chromium against `chiffon up`, as a
// person would, and save a screenshot of each page they check. Without a
// Chromium on the machine they are skipped, unless CHIFFON_BROWSER_TESTS=1 (as
// .ci/run sets, having installed one) makes that a failure.

// dash is a `chiffon up` and a browser pointed at its dashboard.
type dash struct {
	t       *testing.T
	base    string // the dashboard's URL, ending in /
	secrets string // up's secrets dir
	browser context.Context
	shots   string
	client  *client.Client
}

// newDash starts `chiffon up` on free ports and a headless Chromium.
func newDash(t *testing.T) *dash {
	t.Helper()
	chromiumPath(t) // skips before up starts, without one
	dir := t.TempDir()
	_, printed := startUp(t, dir)
	base := ""
	for _, l := range printed {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "dashboard"); ok {
			base = strings.Fields(rest)[0]
		}
	}
	if !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.HasSuffix(base, "/") {
		t.Fatalf("chiffon up printed no dashboard address:\n%s", strings.Join(printed, "\n"))
	}
	return openDash(t, base, filepath.Join(dir, "chiffon-data", "secrets"))
}

// openDash starts a headless Chromium for the dashboard at base (its URL,
// ending in /), whose API takes the tokens in secrets (api.token, viewer.token).
func openDash(t *testing.T, base, secrets string) *dash {
	t.Helper()
	chrome := chromiumPath(t)
	d := &dash{t: t, base: base, secrets: secrets}
	d.client = &client.Client{BaseURL: strings.TrimSuffix(d.base, "/"), Token: d.token("api.token"), HTTP: &http.Client{Timeout: time.Minute}}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	d.browser = bctx
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		t.Fatalf("start %s: %v", chrome, err)
	}
	shots, err := os.MkdirTemp("", "chiffon-dashboard-"+t.Name()+"-")
	if err != nil {
		t.Fatal(err)
	}
	d.shots = shots
	t.Logf("screenshots of %s in %s", t.Name(), shots)
	return d
}

// chromiumPath finds Chromium, or skips the test when there is none and
// CHIFFON_BROWSER_TESTS is not 1.
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CHIFFON_BROWSER_TESTS") == "1" {
		t.Fatal("no Chromium on this machine, and CHIFFON_BROWSER_TESTS=1 requires the browser tests")
	}
	t.Skip("no Chromium on this machine (apt-get install chromium)")
	return ""
}

func (d *dash) token(name string) string {
	d.t.Helper()
	tok, err := broker.ReadTokenFile(filepath.Join(d.secrets, name))
	if err != nil {
		d.t.Fatal(err)
	}
	return tok
}

// do runs browser actions with a deadline.
func (d *dash) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(d.browser, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		d.shot("failed-" + what)
		d.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page, waiting for it when it is
// a promise.
func eval[T any](d *dash, expr string) T {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(d.browser, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		d.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS waits until a JavaScript expression is true in the page, asking every
// 50 ms; an expression that throws, or a page between two loads, counts as false.
func (d *dash) waitJS(what, expr string, timeout time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	check := "(function () { try { return !!(" + expr + "); } catch (e) { return false; } })()"
	for {
		ctx, cancel := context.WithTimeout(d.browser, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](check))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			d.shot("failed-" + what)
			d.t.Fatalf("%s: not within %s (last error %v); the page says:\n%s", what, timeout, err, d.pageText())
		}
		time.Sleep(50 * time.Millisecond) // the page's own pace: what it shows is polled
	}
}

// pageText is the page's text, or why it could not be read.
func (d *dash) pageText() string {
	ctx, cancel := context.WithTimeout(d.browser, 5*time.Second)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
	if err != nil {
		return err.Error()
	}
	return text
}

// shot saves a screenshot of the whole page.
func (d *dash) shot(name string) {
	ctx, cancel := context.WithTimeout(d.browser, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 makes a PNG
	if err != nil {
		d.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(d.shots, name+".png"), png, 0o644); err != nil {
		d.t.Logf("screenshot %s: %v", name, err)
	}
}

// login signs in with token and waits for the page that follows.
func (d *dash) login(token string) {
	d.t.Helper()
	d.do("sign in",
		chromedp.Navigate(d.base+"login"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS(`form[action$="login"] button`)),
	)
	// The form's answer: another page, or the sign-in page again with why.
	d.waitJS("the sign-in's answer", `document.readyState === "complete" &&
		(location.pathname !== "/login" || document.body.innerText.includes("not one of this orchestrator's"))`, 20*time.Second)
}

// submitSleep submits a sleep task from the form and returns its page's task id.
func (d *dash) submitSleep(seconds string) string {
	d.t.Helper()
	d.do("submit form",
		chromedp.Navigate(d.base+"submit?target=infra/sleep"),
		chromedp.WaitVisible(chromedp.CSS("#param-seconds")),
		chromedp.SendKeys(chromedp.CSS("#param-seconds"), seconds),
	)
	d.shot("submit-form")
	d.do("submit", chromedp.Click(chromedp.CSS("#submit")))
	d.waitJS("the task's page", `location.pathname.startsWith("/tasks/") && document.getElementById("state") !== null`, 30*time.Second)
	return strings.TrimPrefix(eval[string](d, "location.pathname"), "/tasks/")
}

// A wrong token is refused on the sign-in page; the right one lands on the home
// page, which shows the four agents of `chiffon up` online.
func TestDashboardSignIn(t *testing.T) {
	d := newDash(t)
	d.login("not-a-token-" + d.token("viewer.token"))
	d.waitJS("the refusal", `document.body.innerText.includes("not one of this orchestrator's")`, 10*time.Second)
	d.shot("wrong-token")
	if path := eval[string](d, "location.pathname"); path != "/login" {
		t.Fatalf("a wrong token landed on %s", path)
	}
	d.login(d.token("api.token"))
	if path := eval[string](d, "location.pathname"); path != "/" {
		t.Fatalf("the right token landed on %s", path)
	}
	for deadline := time.Now().Add(30 * time.Second); eval[string](d, `document.getElementById("agents-online").textContent`) != "4"; {
		if time.Now().After(deadline) {
			d.shot("failed-agents")
			t.Fatalf("the home page does not show 4 agents online:\n%s", d.pageText())
		}
		time.Sleep(500 * time.Millisecond) // the agents' own pace: they register as up starts
		d.do("reload", chromedp.Reload())
	}
	d.shot("home")
	// On a phone, in the dark: the page fits the screen's width (tables scroll in
	// their own box) and the colours follow the system's scheme.
	ctx, cancel := context.WithTimeout(d.browser, 20*time.Second)
	_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	d.do("a phone's screen", chromedp.EmulateViewport(390, 844), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#counters")))
	d.shot("home-phone-dark")
	if w := eval[int](d, "document.documentElement.scrollWidth"); w > 390 {
		t.Errorf("on a 390 px screen the page is %d px wide", w)
	}
	if bg := eval[string](d, "getComputedStyle(document.body).backgroundColor"); bg != "rgb(21, 23, 26)" {
		t.Errorf("dark scheme: the background is %s", bg)
	}
	for _, want := range []string{"agents online", "Active tasks", "infra-1", "desktop-1", "code-1", "research-1"} {
		if body := d.pageText(); !strings.Contains(body, want) {
			t.Errorf("the home page lacks %q", want)
		}
	}
	// An agent's page shows the resources its heartbeats report.
	d.do("an agent's page", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(d.base+"agents/code-1"), chromedp.WaitVisible(chromedp.CSS("main dl")))
	d.shot("agent")
	if body := d.pageText(); !strings.Contains(body, " cores, ") || !strings.Contains(body, "MB memory") {
		t.Errorf("the agent's page shows no resources:\n%s", body)
	}
}

// A task submitted from the form shows its progress bar moving and its output
// appearing live on its page, then its result.
func TestDashboardShowsATaskLive(t *testing.T) {
	d := newDash(t)
	d.login(d.token("api.token"))
	id := d.submitSleep("4")
	// Record, as the page shows them, the progress values and whether output had
	// come while the task still ran.
	d.waitJS("the task running", `document.getElementById("state").textContent === "running"`, 20*time.Second)
	_ = eval[bool](d, `window.seen = []; window.liveOutput = false; setInterval(function () {
		const s = document.getElementById("state"); if (!s) return;
		if (s.textContent === "running") {
			window.seen.push(Number(document.getElementById("progress").value));
			if (document.getElementById("output").textContent.includes("1s of")) window.liveOutput = true;
		}
	}, 50); true`)
	d.waitJS("output while running", `window.liveOutput === true`, 20*time.Second)
	d.waitJS("the progress bar moving", `new Set(window.seen.filter(v => v > 0 && v < 100)).size >= 2`, 20*time.Second)
	d.shot("task-running")
	d.waitJS("the result", `document.getElementById("result") !== null && document.getElementById("state").textContent === "succeeded"`, 30*time.Second)
	d.shot("task-done")
	// The reload that shows the result ends the recording: read it from the
	// server-rendered page instead.
	if body := d.pageText(); !strings.Contains(body, "slept 4s") || !strings.Contains(body, "Exit code") {
		t.Errorf("the finished task's page lacks its output or result:\n%s", body)
	}
	tsk, err := d.client.Get(context.Background(), id)
	if err != nil || tsk.State != task.StateSucceeded {
		t.Fatalf("task %s: %+v, %v", id, tsk, err)
	}
}

// A sleep task is cancelled with the button and shows cancelled.
func TestDashboardCancelsATask(t *testing.T) {
	d := newDash(t)
	d.login(d.token("api.token"))
	id := d.submitSleep("60")
	d.waitJS("the task running", `document.getElementById("state").textContent === "running"`, 20*time.Second)
	d.do("cancel", chromedp.Click(chromedp.CSS("#cancel")))
	d.waitJS("cancelled", `document.getElementById("state").textContent === "cancelled"`, 30*time.Second)
	d.shot("task-cancelled")
	if tsk, err := d.client.Get(context.Background(), id); err != nil || tsk.State != task.StateCancelled {
		t.Fatalf("task %s: %+v, %v", id, tsk, err)
	}
}

// A task with 20 MiB of output: its page holds only the last 64 KiB and stays
// responsive, and the link to the whole output returns all of it.
func TestDashboardShowsTheTailOfALargeOutput(t *testing.T) {
	d := newDash(t)
	line := strings.Repeat("x", 1023) + "\n"
	tsk, err := d.client.Submit(context.Background(), api.SubmitRequest{ToAgent: "infra", WorkType: "echo",
		Parameters: map[string]any{"message": line, "repeat": 20 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !tsk.State.Final() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // the task's own pace: a poll of the API
		if tsk, err = d.client.Get(context.Background(), tsk.ID); err != nil {
			t.Fatal(err)
		}
	}
	if tsk.State != task.StateSucceeded || tsk.OutputBytes != 20<<20 {
		t.Fatalf("the 20 MiB task: %+v", tsk)
	}
	d.login(d.token("api.token"))
	start := time.Now()
	d.do("open the task", chromedp.Navigate(d.base+"tasks/"+tsk.ID), chromedp.WaitVisible(chromedp.CSS("#output")))
	t.Logf("the page of a task with 20 MiB of output loaded in %s", time.Since(start).Round(time.Millisecond))
	d.shot("large-output")
	if n := eval[int](d, `document.getElementById("output").textContent.length`); n > 64<<10 || n < 60<<10 {
		t.Errorf("the page shows %d bytes of output, want the last 64 KiB", n)
	}
	if n := eval[int](d, `document.documentElement.outerHTML.length`); n > 200<<10 {
		t.Errorf("the page is %d bytes: more than the tail", n)
	}
	// Responsive: a script runs at once.
	if v := eval[int](d, `1 + 1`); v != 2 {
		t.Fatal("the page does not run scripts")
	}
	n := eval[int](d, `fetch(document.getElementById("full-output").href).then(r => r.text()).then(t => t.length)`)
	if n != 20<<20 {
		t.Errorf("the whole-output link returned %d bytes, want %d", n, 20<<20)
	}
}

// A viewer sees no submit or cancel controls, and the API refuses them to its
// token with 403.
func TestDashboardViewerCannotAct(t *testing.T) {
	d := newDash(t)
	running, err := d.client.Submit(context.Background(), api.SubmitRequest{ToAgent: "infra", WorkType: "sleep",
		Parameters: map[string]any{"seconds": 30}})
	if err != nil {
		t.Fatal(err)
	}
	d.login(d.token("viewer.token"))
	d.waitJS("home", `location.pathname === "/"`, 10*time.Second)
	if eval[bool](d, `document.querySelector('a[href$="submit"]') !== null`) {
		t.Error("a viewer sees the Submit link")
	}
	d.do("open the task", chromedp.Navigate(d.base+"tasks/"+running.ID), chromedp.WaitVisible(chromedp.CSS("#state")))
	d.shot("viewer-task")
	if eval[bool](d, `document.getElementById("cancel") !== null || document.getElementById("rerun") !== null`) {
		t.Error("a viewer sees the cancel or re-run button")
	}
	d.do("open the submit form", chromedp.Navigate(d.base+"submit"), chromedp.WaitReady(chromedp.CSS("main")))
	if body := d.pageText(); !strings.Contains(body, "403") || strings.Contains(body, "Agent type and work type") {
		t.Errorf("a viewer got the submit form:\n%s", body)
	}
	viewer := &client.Client{BaseURL: d.client.BaseURL, Token: d.token("viewer.token"), HTTP: d.client.HTTP}
	var apiErr *client.APIError
	if _, err := viewer.Submit(context.Background(), api.SubmitRequest{ToAgent: "infra", WorkType: "echo",
		Parameters: map[string]any{"message": "hi"}}); !errors.As(err, &apiErr) || apiErr.Status != 403 {
		t.Errorf("a viewer's submit through the API: %v, want 403", err)
	}
	if _, err := viewer.Cancel(context.Background(), running.ID, "viewer"); !errors.As(err, &apiErr) || apiErr.Status != 403 {
		t.Errorf("a viewer's cancel through the API: %v, want 403", err)
	}
	if tsk, _ := d.client.Get(context.Background(), running.ID); tsk == nil || tsk.CancelRequested {
		t.Errorf("the viewer's cancel reached the task: %+v", tsk)
	}
	_, _ = d.client.Cancel(context.Background(), running.ID, "the test is over") // up stops at once
}

// A form posted without the session's CSRF token is refused, and changes
// nothing.
func TestDashboardRefusesAFormWithoutItsCSRFToken(t *testing.T) {
	d := newDash(t)
	d.login(d.token("api.token"))
	id := d.submitSleep("30")
	d.waitJS("the task running", `document.getElementById("state").textContent === "running"`, 20*time.Second)
	_ = eval[bool](d, `document.querySelector('form[action$="/cancel"] input[name=csrf]').remove(); true`)
	d.do("cancel without the token", chromedp.Click(chromedp.CSS("#cancel")))
	d.waitJS("the refusal", `document.body.innerText.includes("CSRF")`, 10*time.Second)
	d.shot("csrf-refused")
	if body := d.pageText(); !strings.Contains(body, "403") {
		t.Errorf("the refusal does not say 403:\n%s", body)
	}
	if tsk, err := d.client.Get(context.Background(), id); err != nil || tsk.CancelRequested || tsk.State.Final() {
		t.Fatalf("a form without its CSRF token cancelled the task: %+v, %v", tsk, err)
	}
	_, _ = d.client.Cancel(context.Background(), id, "the test is over") // up stops at once
}

// A batch made through the API shows on its page, whose rows follow the batch's
// event stream (relayed under the session cookie) to succeeded without a reload;
// a schedule added through the API shows its last firing's task, and is paused,
// then removed, with the Schedules page's buttons, and the API agrees.
func TestDashboardFollowsABatchAndPausesASchedule(t *testing.T) {
	d := newDash(t)
	ctx := context.Background()
	d.login(d.token("api.token"))
	for deadline := time.Now().Add(30 * time.Second); ; {
		agents, err := d.client.Agents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(agents, func(a api.AgentInfo) bool {
			return a.ID == "infra-1" && a.State == "online" && slices.Contains(a.WorkTypes, "sleep")
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("infra-1 does not offer sleep online: %+v", agents)
		}
		time.Sleep(200 * time.Millisecond) // the agents' own pace: they register as up starts
	}
	b, err := d.client.CreateBatch(ctx, api.BatchRequest{ToAgent: "infra", WorkType: "sleep", Parameters: map[string]any{"seconds": 4}})
	if err != nil {
		t.Fatal(err)
	}
	d.do("open the batch", chromedp.Navigate(d.base+"batches/"+b.ID), chromedp.WaitVisible(chromedp.CSS(`tr[data-agent="infra-1"]`)))
	// Record in sessionStorage, which outlives the reload at the batch's end,
	// what the row shows when the page loaded and at each change the script
	// makes to it: the observer lives in this load of the page only.
	_ = eval[bool](d, `(function () {
		const row = document.querySelector('tr[data-agent="infra-1"]');
		const seen = [];
		const note = function (live) {
			seen.push({live: live, state: row.querySelector('[data-field="state"]').textContent,
				progress: Number(row.querySelector("progress").value), link: !row.querySelector("a.task").hidden});
			sessionStorage.setItem("batchSeen", JSON.stringify(seen));
		};
		note(false);
		new MutationObserver(function () { note(true); }).observe(row, {subtree: true, childList: true, characterData: true, attributes: true});
		return true;
	})()`)
	const seen = `JSON.parse(sessionStorage.getItem("batchSeen") || "[]")`
	if first := eval[string](d, seen+`[0].state`); first == "succeeded" {
		t.Fatalf("the batch's page loaded with its task done already: nothing to follow")
	}
	d.waitJS("the row running, live", seen+`.some(s => s.live && s.state === "running" && s.link)`, 30*time.Second)
	d.shot("batch-running")
	d.waitJS("the row succeeded, live", seen+`.some(s => s.live && s.state === "succeeded")`, 30*time.Second)
	d.waitJS("the finished batch, reloaded", `document.getElementById("batch").dataset.final === "true" &&
		document.getElementById("batch-state").textContent === "succeeded"`, 30*time.Second)
	d.shot("batch-done")
	if moved := eval[bool](d, seen+`.some(s => s.live && s.progress > 0 && s.progress < 100)`); !moved {
		t.Errorf("the progress bar did not move live: %s", eval[string](d, `sessionStorage.getItem("batchSeen")`))
	}
	if end, err := d.client.Batch(ctx, b.ID); err != nil || end.State != api.BatchSucceeded || end.FinishedAt == nil {
		t.Fatalf("batch %s: %+v, %v", b.ID, end, err)
	}
	// The row's task links back to the batch; the list shows the batch.
	d.do("open the batch's task", chromedp.Click(chromedp.CSS(`tr[data-agent="infra-1"] a.task`)))
	d.waitJS("the task's page", `document.getElementById("batch-link") !== null`, 10*time.Second)
	d.shot("batch-task")
	d.do("the batches", chromedp.Navigate(d.base+"batches"), chromedp.WaitVisible(chromedp.CSS("#batches")))
	d.shot("batches")
	if body := d.pageText(); !strings.Contains(body, task.ShortID(b.ID)) || !strings.Contains(body, "1 succeeded") {
		t.Errorf("the Batches page lacks the batch:\n%s", body)
	}
	// An agent named and never heard from is a row of its own, with no task.
	odd, err := d.client.CreateBatch(ctx, api.BatchRequest{ToAgent: "infra", WorkType: "echo",
		Parameters: map[string]any{"message": "hi"}, Agents: []string{"infra-1", "infra-9"}})
	if err != nil {
		t.Fatal(err)
	}
	d.do("open the second batch", chromedp.Navigate(d.base+"batches/"+odd.ID), chromedp.WaitVisible(chromedp.CSS(`tr[data-agent="infra-9"]`)))
	d.waitJS("the second batch's end", `document.getElementById("batch").dataset.final === "true"`, 30*time.Second)
	d.shot("batch-unknown-agent")
	if row := eval[string](d, `document.querySelector('tr[data-agent="infra-9"]').innerText`); !strings.Contains(row, "unknown") || !strings.Contains(row, "never heard from") {
		t.Errorf("the unknown agent's row: %q", row)
	}

	// A schedule that fires every second: its last firing links to its task,
	// whose page names the schedule and the fire time.
	if _, err := d.client.AddSchedule(ctx, api.ScheduleSpec{Name: "every-second", Cron: "* * * * * *", TZ: "Europe/Paris",
		Task: &api.SubmitRequest{ToAgent: "infra", WorkType: "echo", Parameters: map[string]any{"message": "hi"}}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		s, err := d.client.Schedule(ctx, "every-second")
		if err != nil {
			t.Fatal(err)
		}
		if s.Last != nil && s.Last.TaskID != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the schedule has not fired: %+v", s)
		}
		time.Sleep(200 * time.Millisecond) // the schedule's own pace: it fires each second
	}
	const row = `document.querySelector("#schedule-every-second")`
	d.do("the schedules", chromedp.Navigate(d.base+"schedules"), chromedp.WaitVisible(chromedp.CSS("#schedule-every-second")))
	d.shot("schedules")
	d.do("the last firing's task", chromedp.Click(chromedp.CSS(`#schedule-every-second a[href*="/tasks/"]`)))
	d.waitJS("the fired task's page", `document.getElementById("schedule-link") !== null`, 10*time.Second)
	d.shot("scheduled-task")
	if body := d.pageText(); !strings.Contains(body, "every-second") || !strings.Contains(body, "Fire time") {
		t.Errorf("the fired task's page lacks its schedule:\n%s", body)
	}
	d.do("the schedules again", chromedp.Navigate(d.base+"schedules"), chromedp.WaitVisible(chromedp.CSS("#schedule-every-second")))
	d.do("pause", chromedp.Click(chromedp.CSS("#schedule-every-second button.pause")))
	d.waitJS("paused", row+`.querySelector(".sched-state").textContent === "paused" && `+row+`.querySelector("button.resume") !== null`, 10*time.Second)
	d.shot("schedule-paused")
	if s, err := d.client.Schedule(ctx, "every-second"); err != nil || !s.Paused || s.Next != nil {
		t.Fatalf("the API's schedule after Pause: %+v, %v", s, err)
	}
	d.do("remove", chromedp.Click(chromedp.CSS("#schedule-every-second button.remove")))
	d.waitJS("the removal's page", `document.getElementById("confirm-remove") !== null`, 10*time.Second)
	d.shot("schedule-remove")
	d.do("confirm", chromedp.Click(chromedp.CSS("#confirm-remove")))
	d.waitJS("removed", `location.pathname === "/schedules" && `+row+` === null`, 10*time.Second)
	var apiErr *client.APIError
	if _, err := d.client.Schedule(ctx, "every-second"); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Fatalf("the API's schedule after Remove: %v, want 404", err)
	}
}
