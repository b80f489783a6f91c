package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"strconv"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"ago":      ago,
	"abs":      func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"iso":      func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"isoMilli": func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") },
	"elapsed":  elapsed,
	"bytes":    humanBytes,
	"mib":      func(mb int64) string { return humanBytes(mb << 20) },
	"final":    func(s task.State) bool { return s.Final() },
	"step":     currentStep,
	"deref":    func(t *time.Time) time.Time { return *t },
	"add":      func(a, b int) int { return a + b },
	"jsonText": func(v any) string { b, _ := json.MarshalIndent(v, "", "  "); return string(b) },
	"dict":     dict,
	"until":    until,
	"started":  targetStarted,
	"counts":   countList,
	"what":     eventWhat,
	"short":    task.ShortID,
	"done":     stepsDone,
	"need":     needText,
	"kind":     func(st api.WorkflowStep) string { k, _ := stepKind(st); return k },
}

// dict makes a map of its key, value pairs, to pass several values to a
// template.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("dict: an odd number of arguments")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

// ago says how long before now t was, in the largest whole unit.
func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h ago"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d ago"
}

// until says how long after now t is, in the largest whole unit.
func until(t time.Time) string {
	d := time.Until(t)
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return "in " + strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return "in " + strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		return "in " + strconv.Itoa(int(d.Hours())) + "h"
	}
	return "in " + strconv.Itoa(int(d.Hours()/24)) + "d"
}

// elapsed is a task's run time so far, or to its end.
func elapsed(t *task.Task) string {
	end := time.Now()
	if t.FinishedAt != nil {
		end = *t.FinishedAt
	}
	d := end.Sub(t.CreatedAt).Round(time.Second)
	if d < time.Second {
		return end.Sub(t.CreatedAt).Round(time.Millisecond).String()
	}
	return d.String()
}

func humanBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// currentStep is the name of the task's latest step, or "".
func currentStep(t *task.Task) string {
	if len(t.Steps) == 0 {
		return ""
	}
	return t.Steps[len(t.Steps)-1].Name
}

func jsonIndent(b *bytes.Buffer, raw []byte) error { return json.Indent(b, raw, "", "  ") }
