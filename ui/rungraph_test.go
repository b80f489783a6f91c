package ui

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// flowOf is a workflow whose steps are tasks, each "name" or
// "name<-need,need:when", in order.
func flowOf(steps ...string) *api.WorkflowSpec {
	s := &api.WorkflowSpec{Name: "w"}
	for _, st := range steps {
		name, needs, _ := strings.Cut(st, "<-")
		step := api.WorkflowStep{Name: name, Task: &api.SubmitRequest{ToAgent: "code", WorkType: "echo"}}
		for n := range strings.SplitSeq(needs, ",") {
			if n != "" {
				need, when, _ := strings.Cut(n, ":")
				step.Needs = append(step.Needs, api.WorkflowNeed{Step: need, When: when})
			}
		}
		s.Steps = append(s.Steps, step)
	}
	return s
}

// TestStepColumnsAreOneMoreThanTheDeepestNeed: a step's column is 0 without
// needs, else one more than the greatest column of the steps it needs,
// however the steps are ordered; a need of no step, or one that closes a
// cycle, adds nothing.
func TestStepColumnsAreOneMoreThanTheDeepestNeed(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec *api.WorkflowSpec
		want map[string]int
	}{
		{"one step", flowOf("a"), map[string]int{"a": 0}},
		{"a chain", flowOf("a", "b<-a", "c<-b"), map[string]int{"a": 0, "b": 1, "c": 2}},
		{"two roots", flowOf("a", "b"), map[string]int{"a": 0, "b": 0}},
		{"a diamond", flowOf("a", "b<-a", "c<-a", "d<-b,c"), map[string]int{"a": 0, "b": 1, "c": 1, "d": 2}},
		{"uneven needs: the deepest wins", flowOf("a", "b<-a", "c<-b", "d<-c,a"), map[string]int{"a": 0, "b": 1, "c": 2, "d": 3}},
		{"a need listed after its step", flowOf("d<-c", "c<-b", "b<-a", "a"), map[string]int{"a": 0, "b": 1, "c": 2, "d": 3}},
		{"conditions count as needs", flowOf("a", "b<-a:failure", "c<-b:always"), map[string]int{"a": 0, "b": 1, "c": 2}},
		{"a need of no step", flowOf("a<-ghost", "b<-a"), map[string]int{"a": 0, "b": 1}},
		{"a cycle", flowOf("a<-b", "b<-a"), map[string]int{"a": 1, "b": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := stepColumns(tc.spec)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("columns %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLayoutPlacesStepsInColumnsAndRows: each box is in its column, and below
// the steps before it in the spec in the same column; the drawing holds them
// all.
func TestLayoutPlacesStepsInColumnsAndRows(t *testing.T) {
	g := layoutGraph(flowOf("a", "b<-a", "c<-a", "d<-b,c", "e"), nil)
	type place struct{ col, row, x, y int }
	step, down := nodeWidth+columnGap, nodeHeight+rowGap
	want := map[string]place{
		"a": {0, 0, graphPad, graphPad}, "b": {1, 0, graphPad + step, graphPad}, "c": {1, 1, graphPad + step, graphPad + down},
		"d": {2, 0, graphPad + 2*step, graphPad}, "e": {0, 1, graphPad, graphPad + down},
	}
	for _, n := range g.Nodes {
		if got := (place{n.Col, n.Row, n.X, n.Y}); got != want[n.Name] {
			t.Errorf("%s at %+v, want %+v", n.Name, got, want[n.Name])
		}
	}
	if w, h := 2*graphPad+3*nodeWidth+2*columnGap, 2*graphPad+2*nodeHeight+rowGap; g.Width != w || g.Height != h {
		t.Errorf("the drawing is %dx%d, want %dx%d", g.Width, g.Height, w, h)
	}
	if empty := layoutGraph(&api.WorkflowSpec{}, nil); empty.Width != 0 || len(empty.Nodes) != 0 {
		t.Errorf("no steps: %+v", empty)
	}
}

// TestEdgesRunFromNeedToStepWithTheirCondition: an edge per need, from the
// needed step's right side to the needing step's left, its condition named
// (success by default) and labelled when it is not success.
func TestEdgesRunFromNeedToStepWithTheirCondition(t *testing.T) {
	g := layoutGraph(flowOf("a", "b<-a", "c<-b:failure", "d<-b:always,a", "e<-ghost"), nil)
	var got []string
	for _, e := range g.Edges {
		got = append(got, fmt.Sprintf("%s->%s %s %v", e.From, e.To, e.When, e.Labelled()))
	}
	want := []string{"a->b success false", "b->c failure true", "b->d always true", "a->d success false"}
	if !slices.Equal(got, want) {
		t.Errorf("edges %q, want %q", got, want)
	}
	at := map[string]graphNode{}
	for _, n := range g.Nodes {
		at[n.Name] = n
	}
	ends := regexp.MustCompile(`^M(\d+) (\d+) C.* (\d+) (\d+)$`)
	for _, e := range g.Edges {
		m := ends.FindStringSubmatch(e.Path)
		from, to := at[e.From], at[e.To]
		wantEnds := []string{fmt.Sprint(from.X + nodeWidth), fmt.Sprint(from.Y + nodeHeight/2), fmt.Sprint(to.X), fmt.Sprint(to.Y + nodeHeight/2)}
		if m == nil || !slices.Equal(m[1:], wantEnds) {
			t.Errorf("%s->%s: path %q, want it from %v", e.From, e.To, e.Path, wantEnds)
		}
		if e.LabelX <= from.X+nodeWidth || e.LabelX >= to.X {
			t.Errorf("%s->%s: the label at x %d is not between the boxes", e.From, e.To, e.LabelX)
		}
	}
}

// TestBoxesShowTheStepState: a box's class is its step's state (with waiting
// for a gate that waits, def in a definition), it links to what the step
// made, and says why a skipped step did not run or a failed one failed.
func TestBoxesShowTheStepState(t *testing.T) {
	gate := &task.Approval{State: task.ApprovalWaiting}
	for _, tc := range []struct {
		name      string
		run       api.RunState
		step      *api.StepRun // nil: no run
		class     string
		stateText string
		link      string
		note      string
	}{
		{"a definition", "", nil, "node def", "", "", ""},
		{"pending", api.RunRunning, &api.StepRun{State: api.StepPending}, "node pending", "pending", "", ""},
		{"running, its task made", api.RunRunning, &api.StepRun{State: api.StepRunning, TaskID: "t1"}, "node running", "running", "tasks/t1", ""},
		{"running, its batch made", api.RunRunning, &api.StepRun{State: api.StepRunning, BatchID: "b1"}, "node running", "running", "batches/b1", ""},
		{"succeeded", api.RunRunning, &api.StepRun{State: api.StepSucceeded, TaskID: "t1"}, "node succeeded", "succeeded", "tasks/t1", ""},
		{"failed", api.RunFailed, &api.StepRun{State: api.StepFailed, TaskID: "t1", Error: "exit code 2"}, "node failed", "failed", "tasks/t1", "exit code 2"},
		{"skipped", api.RunFailed, &api.StepRun{State: api.StepSkipped, SkipReason: "step a failed"}, "node skipped", "skipped", "", "step a failed"},
		{"a gate that waits", api.RunRunning, &api.StepRun{State: api.StepRunning, Approval: gate}, "node running waiting", "awaiting approval", "", ""},
		{"a gate of a run that ended", api.RunCancelled, &api.StepRun{State: api.StepRunning, Approval: gate}, "node running", "running", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := flowOf("a")
			var run *api.WorkflowRun
			if tc.step != nil {
				tc.step.Name = "a"
				run = &api.WorkflowRun{State: tc.run, Spec: *spec, Steps: []api.StepRun{*tc.step}}
			}
			n := layoutGraph(spec, run).Nodes[0]
			if n.Class() != tc.class || n.StateText() != tc.stateText || n.Link != tc.link || n.Note != tc.note {
				t.Errorf("class %q, state %q, link %q, note %q; want %q, %q, %q, %q",
					n.Class(), n.StateText(), n.Link, n.Note, tc.class, tc.stateText, tc.link, tc.note)
			}
		})
	}
}

// TestStylesheetColoursEachState: the stylesheet gives each state's box its
// colour (pending grey, running blue, succeeded green, failed red, skipped
// muted and dashed over stripes, a waiting gate violet), and draws failure
// edges red and dashed, always edges grey.
func TestStylesheetColoursEachState(t *testing.T) {
	css, err := os.ReadFile("static/app.css")
	if err != nil {
		t.Fatal(err)
	}
	for rule, want := range map[string]string{
		".graph .node.pending rect":   "stroke: var(--muted)",
		".graph .node.running rect":   "stroke: var(--run)",
		".graph .node.succeeded rect": "stroke: var(--ok)",
		".graph .node.failed rect":    "stroke: var(--bad)",
		".graph .node.skipped rect":   "stroke-dasharray",
		".graph .node.skipped text":   "fill: var(--muted)",
		".graph .node.waiting rect":   "stroke: var(--wait)",
		".graph .edge.failure path":   "stroke: var(--bad); stroke-dasharray",
		".graph .edge.always path":    "stroke: var(--muted)",
	} {
		m := regexp.MustCompile(regexp.QuoteMeta(rule) + ` \{([^}]*)\}`).FindSubmatch(css)
		if m == nil || !strings.Contains(string(m[1]), want) {
			t.Errorf("app.css: %s has no %q", rule, want)
		}
	}
	if !strings.Contains(string(css), ".graph .node.skipped rect") || strings.Contains(string(css), ".graph .node.skipped rect { fill") {
		t.Errorf("app.css fills a skipped box over its stripes")
	}
}

// TestStepsDoneCountsTheEndedSteps: succeeded, failed and skipped steps are
// done; pending and running ones are not.
func TestStepsDoneCountsTheEndedSteps(t *testing.T) {
	run := &api.WorkflowRun{Steps: []api.StepRun{{State: api.StepSucceeded}, {State: api.StepFailed}, {State: api.StepSkipped},
		{State: api.StepRunning}, {State: api.StepPending}}}
	if got := stepsDone(run); got != "3/5" {
		t.Errorf("stepsDone = %s, want 3/5", got)
	}
}

// TestCutKeepsWholeCharacters: a long name is cut to n characters, the last
// an ellipsis; a short one is kept.
func TestCutKeepsWholeCharacters(t *testing.T) {
	for in, want := range map[string]string{"short": "short", "exactly-ten": "exactly-t…", "déploiement": "déploieme…"} {
		if got := cut(in, 10); got != want {
			t.Errorf("cut(%q) = %q, want %q", in, got, want)
		}
	}
	n := graphNode{Kind: kindTask, What: "research/a-very-long-work-type-name"}
	if got := n.KindText(); got != "task · research/a-very-lo…" {
		t.Errorf("a long work's box says %q", got)
	}
}
