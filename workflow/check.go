// Package workflow checks workflow definitions (api.WorkflowSpec) whole, types
// a run's parameters and expands the templates of a step's parameters. It
// holds no state: the fleet package runs the workflows.
package workflow

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/api"
)

// MaxSteps bounds a workflow's steps.
const MaxSteps = 100

// maxRunsLimit bounds max_runs.
const maxRunsLimit = 100

var name = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidName reports whether s may name a workflow or a step.
func ValidName(s string) bool { return name.MatchString(s) }

// Check checks s whole: its name, its parameters, each step's kind and
// request, the needs (existing steps, known conditions, no cycle), the
// templates (each reference to a declared parameter or to a step the step
// needs, directly or through others), the timeout and max_runs. A refusal is an
// *api.FieldError naming the field, such as "steps[2].task.parameters.version".
func Check(s *api.WorkflowSpec) error {
	if !ValidName(s.Name) {
		return &api.FieldError{Field: "name", Message: "must be 1 to 63 of a-z, 0-9, '_' and '-', starting with a letter or digit"}
	}
	if err := checkParams(s.Params); err != nil {
		return err
	}
	if s.Timeout != "" {
		if d, err := time.ParseDuration(s.Timeout); err != nil || d <= 0 {
			return &api.FieldError{Field: "timeout", Message: fmt.Sprintf("%q is not a positive duration such as 2h or 30m", s.Timeout)}
		}
	}
	if s.MaxRuns < 0 || s.MaxRuns > maxRunsLimit {
		return &api.FieldError{Field: "max_runs", Message: fmt.Sprintf("must be 0 (one) to %d", maxRunsLimit)}
	}
	if len(s.Steps) == 0 || len(s.Steps) > MaxSteps {
		return &api.FieldError{Field: "steps", Message: fmt.Sprintf("must hold 1 to %d steps", MaxSteps)}
	}
	index := map[string]int{}
	for i, st := range s.Steps {
		if !ValidName(st.Name) {
			return &api.FieldError{Field: fmt.Sprintf("steps[%d].name", i), Message: "must be 1 to 63 of a-z, 0-9, '_' and '-', starting with a letter or digit"}
		}
		if _, dup := index[st.Name]; dup {
			return &api.FieldError{Field: fmt.Sprintf("steps[%d].name", i), Message: fmt.Sprintf("step %q is named twice", st.Name)}
		}
		index[st.Name] = i
	}
	for i := range s.Steps {
		if err := checkStep(s, i, index); err != nil {
			return err
		}
	}
	if cycle := findCycle(s, index); cycle != nil {
		return &api.FieldError{Field: "steps", Message: "the needs go round in a cycle: " + strings.Join(cycle, " -> ")}
	}
	for i := range s.Steps {
		if err := checkRefs(s, i, index); err != nil {
			return err
		}
	}
	return nil
}

// checkStep checks step i's kind, request and needs.
func checkStep(s *api.WorkflowSpec, i int, index map[string]int) error {
	st := &s.Steps[i]
	at := fmt.Sprintf("steps[%d]", i)
	kinds := 0
	for _, set := range []bool{st.Task != nil, st.Batch != nil, st.Approval != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return &api.FieldError{Field: at, Message: "must be exactly one of task, batch and approval"}
	}
	var err error
	switch {
	case st.Task != nil:
		err = prefix(at+".task.", st.Task.Validate())
	case st.Batch != nil:
		err = prefix(at+".batch.", st.Batch.Validate())
	default:
		if e := st.Approval.Expires; e != "" {
			if d, perr := time.ParseDuration(e); perr != nil || d <= 0 {
				err = &api.FieldError{Field: at + ".approval.expires", Message: fmt.Sprintf("%q is not a positive duration", e)}
			}
		}
	}
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for j, n := range st.Needs {
		f := fmt.Sprintf("%s.needs[%d]", at, j)
		if _, ok := index[n.Step]; !ok {
			return &api.FieldError{Field: f + ".step", Message: fmt.Sprintf("no step is named %q", n.Step)}
		}
		if n.Step == st.Name {
			return &api.FieldError{Field: f + ".step", Message: "a step cannot need itself"}
		}
		if seen[n.Step] {
			return &api.FieldError{Field: f + ".step", Message: fmt.Sprintf("step %q is needed twice", n.Step)}
		}
		seen[n.Step] = true
		switch n.Condition() {
		case api.NeedSuccess, api.NeedFailure, api.NeedAlways:
		default:
			return &api.FieldError{Field: f + ".when", Message: fmt.Sprintf("%q is not success, failure or always", n.When)}
		}
	}
	return nil
}

// prefix puts p before the field of a *api.FieldError.
func prefix(p string, err error) error {
	if fe, ok := err.(*api.FieldError); ok {
		return &api.FieldError{Field: p + fe.Field, Message: fe.Message}
	}
	return err
}

// findCycle returns a cycle of needs, as step names, or nil.
func findCycle(s *api.WorkflowSpec, index map[string]int) []string {
	const (
		unseen = iota
		open
		done
	)
	mark := make([]int, len(s.Steps))
	var stack []string
	var visit func(i int) []string
	visit = func(i int) []string {
		mark[i] = open
		stack = append(stack, s.Steps[i].Name)
		for _, n := range s.Steps[i].Needs {
			j := index[n.Step]
			switch mark[j] {
			case open:
				from := slices.Index(stack, n.Step)
				return append(slices.Clone(stack[from:]), n.Step)
			case unseen:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		mark[i] = done
		return nil
	}
	for i := range s.Steps {
		if mark[i] == unseen {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// Ancestors returns the steps step i needs, directly or through others.
func Ancestors(s *api.WorkflowSpec, i int) map[string]bool {
	index := map[string]int{}
	for j, st := range s.Steps {
		index[st.Name] = j
	}
	out := map[string]bool{}
	var walk func(j int)
	walk = func(j int) {
		for _, n := range s.Steps[j].Needs {
			if !out[n.Step] {
				out[n.Step] = true
				walk(index[n.Step])
			}
		}
	}
	walk(i)
	return out
}

// checkRefs checks the templates of step i's parameters.
func checkRefs(s *api.WorkflowSpec, i int, index map[string]int) error {
	st := &s.Steps[i]
	var params map[string]any
	at := fmt.Sprintf("steps[%d]", i)
	switch {
	case st.Task != nil:
		params, at = st.Task.Parameters, at+".task.parameters"
	case st.Batch != nil:
		params, at = st.Batch.Parameters, at+".batch.parameters"
	}
	var refs []pathRef
	if err := refsIn(map[string]any(params), at, &refs); err != nil {
		return &api.FieldError{Field: at, Message: err.Error()}
	}
	before := Ancestors(s, i)
	for _, pr := range refs {
		r := pr.ref
		switch r.root {
		case "params":
			if _, ok := s.Params[r.path[0]]; !ok {
				return &api.FieldError{Field: pr.path, Message: fmt.Sprintf("${%s}: the workflow declares no parameter %q", r, r.path[0])}
			}
		case "steps":
			j, ok := index[r.path[0]]
			if !ok {
				return &api.FieldError{Field: pr.path, Message: fmt.Sprintf("${%s}: no step is named %q", r, r.path[0])}
			}
			if !before[r.path[0]] {
				return &api.FieldError{Field: pr.path, Message: fmt.Sprintf("${%s}: step %q must need %q (directly or through other steps) to read it", r, st.Name, r.path[0])}
			}
			if s.Steps[j].Approval != nil && r.path[1] != "output" {
				return &api.FieldError{Field: pr.path, Message: fmt.Sprintf("${%s}: an approval step makes no task or batch", r)}
			}
		}
	}
	return nil
}

// Parameter types.
const (
	TypeString  = "string"
	TypeInteger = "integer"
	TypeNumber  = "number"
	TypeBoolean = "boolean"
	TypeObject  = "object"
)

func checkParams(ps map[string]api.WorkflowParam) error {
	for n, p := range ps {
		f := "params." + n
		if !ValidName(strings.ReplaceAll(n, "_", "-")) {
			return &api.FieldError{Field: f, Message: "a parameter's name must be 1 to 63 of a-z, 0-9, '_' and '-'"}
		}
		switch p.Type {
		case "", TypeString, TypeInteger, TypeNumber, TypeBoolean, TypeObject:
		default:
			return &api.FieldError{Field: f + ".type", Message: fmt.Sprintf("%q is not string, integer, number, boolean or object", p.Type)}
		}
		if p.Default != nil {
			if _, err := typed(p, p.Default); err != nil {
				return &api.FieldError{Field: f + ".default", Message: err.Error()}
			}
		}
	}
	return nil
}

// RunParams checks a run's given parameters against s's: each one declared
// and of its type (a string is converted to a declared integer, number,
// boolean or object, as --param k=v gives it), the required ones given. It
// returns them with the defaults filled in. A refusal is an *api.FieldError
// on "params.NAME".
func RunParams(s *api.WorkflowSpec, given map[string]any) (map[string]any, error) {
	out := map[string]any{}
	for n, v := range given {
		p, ok := s.Params[n]
		if !ok {
			return nil, &api.FieldError{Field: "params." + n, Message: fmt.Sprintf("workflow %s declares no parameter %q", s.Name, n)}
		}
		tv, err := typed(p, v)
		if err != nil {
			return nil, &api.FieldError{Field: "params." + n, Message: err.Error()}
		}
		out[n] = tv
	}
	for n, p := range s.Params {
		if _, ok := out[n]; ok {
			continue
		}
		switch {
		case p.Default != nil:
			out[n], _ = typed(p, p.Default)
		case p.Required:
			return nil, &api.FieldError{Field: "params." + n, Message: "is required"}
		}
	}
	return out, nil
}

// typed returns v as p's type, converting a string given on a command line.
func typed(p api.WorkflowParam, v any) (any, error) {
	if s, ok := v.(string); ok && p.Type != "" && p.Type != TypeString {
		var parsed any
		if err := json.Unmarshal([]byte(s), &parsed); err != nil {
			return nil, fmt.Errorf("%q is not a %s", s, p.Type)
		}
		v = parsed
	}
	if n, ok := v.(json.Number); ok {
		f, err := n.Float64()
		if err != nil {
			return nil, fmt.Errorf("%s is not a number", n)
		}
		v = f
	}
	switch x := v.(type) {
	case int:
		v = float64(x)
	case int64:
		v = float64(x)
	}
	ok := false
	switch p.Type {
	case "", TypeString:
		_, ok = v.(string)
	case TypeNumber:
		_, ok = v.(float64)
	case TypeInteger:
		f, isNum := v.(float64)
		ok = isNum && f == math.Trunc(f) && math.Abs(f) < 1<<53
	case TypeBoolean:
		_, ok = v.(bool)
	case TypeObject:
		_, ok = v.(map[string]any)
	}
	if !ok {
		t := p.Type
		if t == "" {
			t = TypeString
		}
		return nil, fmt.Errorf("must be a %s, not %s", t, describe(v))
	}
	return v, nil
}

func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) > 40 {
		return fmt.Sprintf("a %T", v)
	}
	return string(b)
}
