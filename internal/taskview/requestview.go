package taskview

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// How the CLI shows what a task or a batch asks for: the rows of a batch's
// request, the work, labels, values on one line.

// WorkText is a work type and the agent type it goes to.
func WorkText[T ~string](to T, workType string) string { return string(to) + "/" + workType }

// BatchRequestRows adds the rows of what a batch runs and where.
func BatchRequestRows(row func(k, v string), req *api.BatchRequest) {
	row("Work", WorkText(req.ToAgent, req.WorkType))
	if len(req.Parameters) > 0 {
		row("Parameters", CompactJSON(req.Parameters))
	}
	if h := req.Hints; h != nil && *h != (task.Hints{}) {
		row("Hints", CompactJSON(h))
	}
	row("Selector", selectorText(req))
	mp := "0 (all at once)"
	if req.MaxParallel > 0 {
		mp = fmt.Sprint(req.MaxParallel)
	}
	row("Max parallel", mp)
	row("Stop on failure", YesNo(req.StopOnFailure))
}

// selectorText says which agents a batch is for.
func selectorText(req *api.BatchRequest) string {
	s := fmt.Sprintf("every %s agent", req.ToAgent)
	if len(req.Agents) > 0 {
		s = fmt.Sprintf("%s agents %s", req.ToAgent, strings.Join(req.Agents, ","))
	}
	if len(req.Labels) > 0 {
		s += " labelled " + LabelList(req.Labels)
	}
	return s
}

// LabelList is labels as k=v,k=v in key order.
func LabelList(labels map[string]string) string {
	parts := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

// CompactJSON is v as one line of JSON.
func CompactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// YesNo is b as yes or no.
func YesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
