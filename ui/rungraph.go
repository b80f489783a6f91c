package ui

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// The run graph's sizes, in CSS pixels: a step's box, the room between two
// columns (where the edges go) and two rows, and the margin around it all.
const (
	nodeWidth  = 176
	nodeHeight = 60
	columnGap  = 56
	rowGap     = 22
	graphPad   = 10
	// labelRunes and kindRunes are how much of a step's name and of its kind
	// and work its box shows; its tooltip has them whole.
	labelRunes = 20
	kindRunes  = 26
)

// Step kinds, as a box names them.
const (
	kindTask     = "task"
	kindBatch    = "batch"
	kindApproval = "approval"
)

// runGraph is a workflow drawn as steps in columns, each step one column to
// the right of the last step it needs, with an edge from each need to its
// step. It is the SVG's geometry: the template only places what it says.
type runGraph struct {
	Nodes []graphNode
	Edges []graphEdge
	// Width and Height are the drawing's size; NodeWidth and NodeHeight a
	// box's.
	Width, Height         int
	NodeWidth, NodeHeight int
}

// graphNode is one step's box.
type graphNode struct {
	Name string
	// Label is the name as the box shows it: cut to labelRunes, with "…".
	Label string
	// Kind is task, batch or approval; What the task's or batch's work
	// ("code/echo"), "" for a gate.
	Kind, What string
	// State is the step's state in the run; "" draws a workflow's definition.
	State string
	// Waiting marks a gate that waits for an operator's decision now.
	Waiting bool
	// Col and Row place the box; X and Y are its top left corner.
	Col, Row, X, Y int
	// Link is the page of what the step made, under the dashboard's path:
	// tasks/ID or batches/ID; "" when it made nothing (yet). Made names it:
	// "task 1a2b3c4d".
	Link, Made string
	// Note says why a skipped step did not run, or why a failed one failed.
	Note string
}

// Class is the box's CSS class: node, its state, and waiting for a gate
// that waits.
func (n graphNode) Class() string {
	c := "node " + n.State
	if n.State == "" {
		c = "node def"
	}
	if n.Waiting {
		c += " waiting"
	}
	return c
}

// KindText is the box's second line: the kind and the work, cut to fit.
func (n graphNode) KindText() string {
	if n.What == "" {
		return n.Kind
	}
	return cut(n.Kind+" · "+n.What, kindRunes)
}

// StateText is the state as the box says it.
func (n graphNode) StateText() string {
	if n.Waiting {
		return "awaiting approval"
	}
	return n.State
}

// Tooltip is the box's title: all the box cuts or leaves out.
func (n graphNode) Tooltip() string {
	parts := []string{n.Name, n.Kind}
	if n.What != "" {
		parts = append(parts, n.What)
	}
	if s := n.StateText(); s != "" {
		parts = append(parts, s)
	}
	if n.Note != "" {
		parts = append(parts, n.Note)
	}
	return strings.Join(parts, " · ")
}

// graphEdge is one need: an arrow from the needed step to the step that
// needs it, with the need's condition.
type graphEdge struct {
	From, To string
	// When is success, failure or always.
	When string
	// Path is the SVG path's d: a curve from the right middle of From's box to
	// the left middle of To's.
	Path string
	// LabelX and LabelY place the condition's label, shown when it is not
	// success.
	LabelX, LabelY int
}

// Labelled reports whether the edge says its condition: every one but
// success, the default.
func (e graphEdge) Labelled() bool { return e.When != api.NeedSuccess }

// layoutGraph draws spec's steps; with run, each in its state there.
func layoutGraph(spec *api.WorkflowSpec, run *api.WorkflowRun) runGraph {
	cols := stepColumns(spec)
	g := runGraph{NodeWidth: nodeWidth, NodeHeight: nodeHeight}
	rows := map[int]int{}
	at := map[string]*graphNode{}
	maxCol, maxRow := 0, 0
	for _, st := range spec.Steps {
		col := cols[st.Name]
		n := graphNode{Name: st.Name, Label: cut(st.Name, labelRunes), Col: col, Row: rows[col]}
		n.Kind, n.What = stepKind(st)
		n.X = graphPad + col*(nodeWidth+columnGap)
		n.Y = graphPad + n.Row*(nodeHeight+rowGap)
		if run != nil {
			placeState(&n, run)
		}
		rows[col]++
		maxCol, maxRow = max(maxCol, col), max(maxRow, n.Row)
		g.Nodes = append(g.Nodes, n)
	}
	for i := range g.Nodes {
		at[g.Nodes[i].Name] = &g.Nodes[i]
	}
	for _, st := range spec.Steps {
		for _, need := range st.Needs {
			if from := at[need.Step]; from != nil && need.Step != st.Name {
				g.Edges = append(g.Edges, edgeBetween(from, at[st.Name], need.Condition()))
			}
		}
	}
	if len(g.Nodes) > 0 {
		g.Width = 2*graphPad + (maxCol+1)*nodeWidth + maxCol*columnGap
		g.Height = 2*graphPad + (maxRow+1)*nodeHeight + maxRow*rowGap
	}
	return g
}

// stepColumns is each step's column: 0 for a step that needs none, else one
// more than the greatest column of the steps it needs. A need of no step is
// left out, and so is the need that closes a cycle (the API refuses both; a
// page draws what it gets).
func stepColumns(spec *api.WorkflowSpec) map[string]int {
	needs := make(map[string][]api.WorkflowNeed, len(spec.Steps))
	for _, st := range spec.Steps {
		needs[st.Name] = st.Needs
	}
	cols := make(map[string]int, len(spec.Steps))
	visiting := map[string]bool{}
	var column func(name string) int
	column = func(name string) int {
		if c, ok := cols[name]; ok {
			return c
		}
		visiting[name] = true
		c := 0
		for _, n := range needs[name] {
			if _, known := needs[n.Step]; known && !visiting[n.Step] {
				c = max(c, column(n.Step)+1)
			}
		}
		visiting[name] = false
		cols[name] = c
		return c
	}
	for _, st := range spec.Steps {
		column(st.Name)
	}
	return cols
}

// stepKind is what a step is (task, batch or approval) and the work of a
// task or batch.
func stepKind(st api.WorkflowStep) (kind, what string) {
	switch {
	case st.Task != nil:
		return kindTask, string(st.Task.ToAgent) + "/" + st.Task.WorkType
	case st.Batch != nil:
		return kindBatch, string(st.Batch.ToAgent) + "/" + st.Batch.WorkType
	case st.Approval != nil:
		return kindApproval, ""
	}
	return "", ""
}

// placeState gives n its step's state in run, the link to what it made and
// why it was skipped or failed.
func placeState(n *graphNode, run *api.WorkflowRun) {
	n.State = string(api.StepPending)
	s := run.Step(n.Name)
	if s == nil {
		return
	}
	n.State = string(s.State)
	n.Waiting = gateWaits(run, s)
	switch {
	case s.TaskID != "":
		n.Link, n.Made = "tasks/"+s.TaskID, "task "+task.ShortID(s.TaskID)
	case s.BatchID != "":
		n.Link, n.Made = "batches/"+s.BatchID, "batch "+task.ShortID(s.BatchID)
	}
	switch s.State {
	case api.StepSkipped:
		n.Note = s.SkipReason
	case api.StepFailed:
		n.Note = s.Error
	}
}

// gateWaits reports whether s is a gate of run that waits for an operator's
// decision now.
func gateWaits(run *api.WorkflowRun, s *api.StepRun) bool {
	return !run.State.Final() && s.State == api.StepRunning && s.Approval != nil && s.Approval.State == task.ApprovalWaiting
}

// edgeBetween is the edge from box a to box b, which is in a column to its
// right: a curve that leaves a level and arrives level.
func edgeBetween(a, b *graphNode, when string) graphEdge {
	x1, y1 := a.X+nodeWidth, a.Y+nodeHeight/2
	x2, y2 := b.X, b.Y+nodeHeight/2
	bend := (x2 - x1) / 2
	return graphEdge{From: a.Name, To: b.Name, When: when,
		Path:   fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, x1+bend, y1, x2-bend, y2, x2, y2),
		LabelX: (x1 + x2) / 2, LabelY: (y1+y2)/2 - 5}
}

// cut is s cut to n runes, the last of them "…" when it was longer.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// stepsDone says how many of a run's steps ended, of how many: "2/5".
func stepsDone(run *api.WorkflowRun) string {
	done := 0
	for _, s := range run.Steps {
		if s.State.Final() {
			done++
		}
	}
	return fmt.Sprintf("%d/%d", done, len(run.Steps))
}
