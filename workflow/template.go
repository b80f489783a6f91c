package workflow

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The template language of a step's parameters. A string may hold references,
// each written ${path}:
//
//	${params.NAME}                 a parameter of the run
//	${steps.STEP.output}           the structured output of STEP
//	${steps.STEP.output.KEY...}    a member of it, as deep as it goes
//	${steps.STEP.task_id}          the task STEP made (batch_id for a batch)
//	${run.id}                      the run's id
//
// A string that is one reference and nothing else takes the referenced value
// with its JSON type: a number stays a number, an object an object, so one
// step's output reaches the next typed. A reference inside other text is
// written into it: a string as it is, anything else as JSON. "$${" writes a
// literal "${". A reference is checked when the workflow is saved: a
// parameter it declares, a step it needs (directly or through other steps).

// ref is one parsed reference.
type ref struct {
	// root is params, steps or run.
	root string
	// path are the names after the root, at least one.
	path []string
}

// String is the reference as written, without ${ }.
func (r ref) String() string { return r.root + "." + strings.Join(r.path, ".") }

// piece is a run of literal text, or a reference.
type piece struct {
	text string
	ref  *ref
}

// parseTemplate splits s into literal text and references; a reference that
// does not parse is an error naming it.
func parseTemplate(s string) ([]piece, error) {
	var out []piece
	var lit strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			lit.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("%q: a ${ without its }", s)
			}
			r, err := parseRef(s[i+2 : i+end])
			if err != nil {
				return nil, err
			}
			if lit.Len() > 0 {
				out = append(out, piece{text: lit.String()})
				lit.Reset()
			}
			out = append(out, piece{ref: r})
			i += end + 1
		default:
			lit.WriteByte(s[i])
			i++
		}
	}
	if lit.Len() > 0 {
		out = append(out, piece{text: lit.String()})
	}
	return out, nil
}

// parseRef reads the inside of ${...}.
func parseRef(s string) (*ref, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("${%s}: an empty name", s)
		}
	}
	r := &ref{root: parts[0], path: parts[1:]}
	switch {
	case r.root == "params" && len(r.path) == 1:
	case r.root == "run" && len(r.path) == 1 && r.path[0] == "id":
	case r.root == "steps" && len(r.path) == 2 && (r.path[1] == "task_id" || r.path[1] == "batch_id"):
	case r.root == "steps" && len(r.path) >= 2 && r.path[1] == "output":
	default:
		return nil, fmt.Errorf("${%s}: not a reference (params.NAME, steps.STEP.output[.KEY...], steps.STEP.task_id, steps.STEP.batch_id or run.id)", s)
	}
	return r, nil
}

// Scope is what a step's references read when it starts.
type Scope struct {
	// RunID is the run's id.
	RunID string
	// Params are the run's parameters.
	Params map[string]any
	// Steps are the ended steps by name: their outputs and what they made.
	Steps map[string]StepValues
}

// StepValues is what a reference may read of an ended step.
type StepValues struct {
	Output  any
	TaskID  string
	BatchID string
}

// lookup returns the value r names in sc.
func (sc *Scope) lookup(r *ref) (any, error) {
	switch r.root {
	case "run":
		return sc.RunID, nil
	case "params":
		v, ok := sc.Params[r.path[0]]
		if !ok {
			return nil, fmt.Errorf("${%s}: the run has no parameter %q", r, r.path[0])
		}
		return v, nil
	}
	st, ok := sc.Steps[r.path[0]]
	if !ok {
		return nil, fmt.Errorf("${%s}: step %q has not ended", r, r.path[0])
	}
	switch r.path[1] {
	case "task_id":
		return st.TaskID, nil
	case "batch_id":
		return st.BatchID, nil
	}
	v := st.Output
	for i, key := range r.path[2:] {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("${%s}: %s is not an object", r, strings.Join(r.path[:2+i], "."))
		}
		if v, ok = m[key]; !ok {
			return nil, fmt.Errorf("${%s}: the output has no %q", r, key)
		}
	}
	return v, nil
}

// Expand returns v with every template string replaced by its value in sc:
// maps and slices are copied, other values kept.
func Expand(v any, sc *Scope) (any, error) {
	switch x := v.(type) {
	case string:
		return expandString(x, sc)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ev, err := Expand(e, sc)
			if err != nil {
				return nil, err
			}
			out[k] = ev
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			ev, err := Expand(e, sc)
			if err != nil {
				return nil, err
			}
			out[i] = ev
		}
		return out, nil
	}
	return v, nil
}

// ExpandParams is Expand for a step's parameters.
func ExpandParams(p map[string]any, sc *Scope) (map[string]any, error) {
	if p == nil {
		return nil, nil
	}
	v, err := Expand(p, sc)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

func expandString(s string, sc *Scope) (any, error) {
	pieces, err := parseTemplate(s)
	if err != nil {
		return nil, err
	}
	if len(pieces) == 1 && pieces[0].ref != nil {
		return sc.lookup(pieces[0].ref) // typed
	}
	var b strings.Builder
	for _, p := range pieces {
		if p.ref == nil {
			b.WriteString(p.text)
			continue
		}
		v, err := sc.lookup(p.ref)
		if err != nil {
			return nil, err
		}
		b.WriteString(textOf(v))
	}
	return b.String(), nil
}

// textOf writes v into a string: a string as it is, a whole float without its
// point, anything else as JSON.
func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case nil:
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// refsIn returns the references of every template string in v, with the JSON
// path of each, for Check.
func refsIn(v any, path string, out *[]pathRef) error {
	switch x := v.(type) {
	case string:
		pieces, err := parseTemplate(x)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, p := range pieces {
			if p.ref != nil {
				*out = append(*out, pathRef{path: path, ref: p.ref})
			}
		}
	case map[string]any:
		for k, e := range x {
			if err := refsIn(e, path+"."+k, out); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := refsIn(e, fmt.Sprintf("%s[%d]", path, i), out); err != nil {
				return err
			}
		}
	}
	return nil
}

// pathRef is a reference and where it is written.
type pathRef struct {
	path string
	ref  *ref
}
