package tests

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chromedp/chromedp"
)

// greetWorkType is a subprocess work type whose schema has an integer, a
// boolean, an enum and a required string; it prints the parameters it got on
// stdin, as JSON, so that the test reads their types in its output.
const greetWorkType = `  greet:
    description: Prints the parameters it got, as JSON.
    shell: "cat; echo"
    env: [PATH]
    timeout: 1m
    schema:
      type: object
      required: [name]
      additionalProperties: false
      properties:
        n: {type: integer, minimum: 1, maximum: 10, default: 2, description: How many times.}
        loud: {type: boolean, description: Shout it.}
        level: {type: string, enum: [low, high], default: low, description: How much.}
        name: {type: string, description: Whom to greet.}
`

// docShot saves a screenshot of the whole page as name.png among the test's
// screenshots, and into $CHIFFON_SCREENSHOTS when it is set (to update the
// images of docs/images: CHIFFON_SCREENSHOTS=$PWD/../docs/images).
func (d *dash) docShot(name string) {
	d.t.Helper()
	d.shot(name)
	dir := os.Getenv("CHIFFON_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := os.ReadFile(filepath.Join(d.shots, name+".png"))
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	}
	if err != nil {
		d.t.Errorf("screenshot %s for the docs: %v", name, err)
	}
}

// The submit form of a work type whose agent declares its parameters: typed
// inputs (a number input for the integer, a checkbox, a select of the enum, the
// required string marked required), shown when the work type is chosen; a
// missing required value is refused in the page and makes no task; a value the
// schema refuses, given in the JSON box, shows the API's 422 beside its input
// and makes no task; submitted, the task gets the integer 3 and true, not
// "3" and "true". On a 390 px screen the form fits and its Submit button shows.
func TestDashboardSubmitFormIsTypedFromTheSchema(t *testing.T) {
	chromiumPath(t)
	c := newCluster(t, 1)
	c.extraWorkTypes = greetWorkType
	c.writeAgentConfig("code-1")
	c.start()
	d := openDash(t, "http://"+c.httpAddr+"/", c.secretsDir())
	d.login(d.token("api.token"))

	d.do("the blank form", chromedp.Navigate(d.base+"submit"), chromedp.WaitVisible(chromedp.CSS("#target")))
	_ = eval[bool](d, `(function () {
		const pick = document.getElementById("target");
		pick.value = "code/greet";
		pick.dispatchEvent(new Event("change"));
		return true;
	})()`)
	d.waitJS("the chosen work type's inputs", `document.getElementById("param-n") !== null`, 20*time.Second)
	if about := eval[string](d, `document.getElementById("work-description").textContent`); about != "Prints the parameters it got, as JSON." {
		t.Errorf("the work type's description: %q", about)
	}
	checkTypedInputs(d)

	// A missing required value: the browser refuses the form, which never goes.
	_ = eval[bool](d, `(function () {
		window.refused = []; window.sent = 0;
		document.getElementById("submit-form").addEventListener("submit", function () { window.sent++; });
		for (const el of document.querySelectorAll("#param-inputs input, #param-inputs select")) {
			el.addEventListener("invalid", function () { window.refused.push(el.id); });
		}
		return true;
	})()`)
	d.do("submit without a name", chromedp.Click(chromedp.CSS("#submit")))
	d.waitJS("the page's refusal", `window.refused.includes("param-name")`, 10*time.Second)
	if sent := eval[int](d, `window.sent`); sent != 0 || eval[string](d, "location.pathname") != "/submit" {
		t.Fatalf("a form without its required value went: %d submits, at %s", sent, eval[string](d, "location.pathname"))
	}
	assertTasks(t, d, 0)

	// A value the schema refuses, in the JSON box: the API's 422, beside n.
	d.do("fill in the form",
		chromedp.SendKeys(chromedp.CSS("#param-name"), "Ada"),
		chromedp.SetValue(chromedp.CSS("#param-n"), "3"),
		chromedp.Click(chromedp.CSS("#param-loud")),
		chromedp.SetValue(chromedp.CSS("#param-level"), "high"),
	)
	d.docShot("submit-form-1280")
	d.do("a string for n in the JSON box", chromedp.SendKeys(chromedp.CSS("#params_json"), `{"n": "x"}`), chromedp.Click(chromedp.CSS("#submit")))
	d.waitJS("the API's refusal", `document.getElementById("param-n-error") !== null`, 20*time.Second)
	d.shot("submit-refused")
	problem := eval[string](d, `document.getElementById("problem").textContent`)
	beside := eval[string](d, `document.getElementById("param-n-error").textContent`)
	if !strings.HasPrefix(problem, "parameters /n: ") || beside == "" || !strings.Contains(problem, beside) {
		t.Errorf("the API's refusal: %q, beside n: %q", problem, beside)
	}
	assertTasks(t, d, 0)

	// The form as filled in, without the JSON: a task with typed parameters.
	_ = eval[bool](d, `(document.getElementById("params_json").value = "") === ""`)
	d.do("submit the typed form", chromedp.Click(chromedp.CSS("#submit")))
	d.waitJS("the task's page", `location.pathname.startsWith("/tasks/") && document.getElementById("state") !== null`, 30*time.Second)
	d.waitJS("the result", `document.getElementById("result") !== null && document.getElementById("state").textContent === "succeeded"`, 30*time.Second)
	d.shot("submit-task-done")
	var got map[string]json.RawMessage
	out := eval[string](d, `document.getElementById("output").textContent`)
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("the task's output is not the JSON of its parameters: %v\n%s", err, out)
	}
	for name, want := range map[string]string{"n": `3`, "loud": `true`, "level": `"high"`, "name": `"Ada"`} {
		if string(got[name]) != want {
			t.Errorf("the task got %s=%s, want %s (all: %s)", name, got[name], want, out)
		}
	}
	if about := eval[string](d, `document.getElementById("work-description").textContent`); about != "Prints the parameters it got, as JSON." {
		t.Errorf("the task's page describes its work type as %q", about)
	}
	assertTasks(t, d, 1)

	// On a phone: the form fits the width, and Submit shows.
	d.do("the form on a phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(d.base+"submit?target=code/greet"),
		chromedp.WaitVisible(chromedp.CSS("#param-n")), chromedp.SendKeys(chromedp.CSS("#param-name"), "Ada"))
	d.docShot("submit-form-390")
	if w := eval[int](d, "document.documentElement.scrollWidth"); w > 390 {
		t.Errorf("on a 390 px screen the form is %d px wide", w)
	}
	d.do("scroll to Submit", chromedp.ScrollIntoView(chromedp.CSS("#submit")))
	if !eval[bool](d, `(function () {
		const b = document.getElementById("submit").getBoundingClientRect();
		return b.width > 0 && b.height > 0 && b.left >= 0 && b.right <= 390 && b.top >= 0 && b.bottom <= innerHeight;
	})()`) {
		t.Errorf("on a 390 px screen Submit is not in view: %s", eval[string](d, `JSON.stringify(document.getElementById("submit").getBoundingClientRect())`))
	}
}

// checkTypedInputs checks the greet form's inputs: typed, labelled, the
// required one marked, the defaults in them.
func checkTypedInputs(d *dash) {
	d.t.Helper()
	for what, expr := range map[string]string{
		"n is a number input of step 1, 1 to 10, holding 2": `(function () {
			const n = document.getElementById("param-n");
			return n.type === "number" && n.step === "1" && n.min === "1" && n.max === "10" && n.value === "2";
		})()`,
		"loud is a checkbox": `document.getElementById("param-loud").type === "checkbox"`,
		"level is a select of low and high, low chosen": `(function () {
			const l = document.getElementById("param-level");
			const values = Array.from(l.options).map(o => o.value).filter(v => v !== "");
			return l.tagName === "SELECT" && values.join(",") === "low,high" && l.value === "low";
		})()`,
		"name is a required text input, its label says so": `(function () {
			const n = document.getElementById("param-name");
			return n.type === "text" && n.required && n.labels[0].textContent.includes("required");
		})()`,
		"every input has its label": `Array.from(document.querySelectorAll("#param-inputs input, #param-inputs select")).every(e => e.labels.length === 1)`,
		"the descriptions help": `document.getElementById("param-name").getAttribute("aria-describedby") === "param-name-help" &&
			document.getElementById("param-name-help").textContent === "Whom to greet."`,
	} {
		if !eval[bool](d, expr) {
			d.shot("failed-inputs")
			d.t.Errorf("%s: not so; the form:\n%s", what, eval[string](d, `document.getElementById("param-inputs").outerHTML`))
		}
	}
}

// assertTasks checks that the API lists n tasks.
func assertTasks(t *testing.T, d *dash, n int) {
	t.Helper()
	tasks, err := d.client.List(context.Background(), api.ListOptions{})
	if err != nil || len(tasks) != n {
		t.Fatalf("the API lists %d tasks (%v), want %d", len(tasks), err, n)
	}
	for _, tk := range tasks {
		if tk.State != task.StateSucceeded && n > 0 {
			t.Errorf("task %s: %s", tk.ID, tk.State)
		}
	}
}
