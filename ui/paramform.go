package ui

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/chiffon-dev/chiffon/worktype"
)

// paramPrefix begins the form name of each parameter's input, apart from the
// form's own fields (target, the hints).
const paramPrefix = "p."

// Input kinds: how the submit form takes a parameter.
const (
	kindText     = "text"     // a string, or a value of no declared type: kept as text
	kindNumber   = "number"   // an integer (step 1) or a number
	kindCheckbox = "checkbox" // a boolean: checked is true, unchecked false
	kindSelect   = "select"   // one of the schema's enum
	kindList     = "list"     // an array of scalars, as comma-separated text
	kindJSON     = "json"     // an object or an array of them: only in the JSON box
)

// paramInput is one parameter of a work type as the submit form shows it: the
// schema's field, the input that takes it and the value that input holds.
type paramInput struct {
	worktype.Field
	// ID is the input's id; FormName its name in the form.
	ID, FormName string
	// Kind is one of the input kinds above.
	Kind string
	// TypeText says what the input takes, beside its label: "integer",
	// "list of string, comma-separated".
	TypeText string
	// Step, Min and Max are a number input's attributes; "" leaves one out.
	Step, Min, Max string
	// Value is the text the input holds: what was posted, or the default.
	Value string
	// Checked is a checkbox's state.
	Checked bool
	// Options are a select's choices.
	Options []paramOption
	// Error is why the value given was refused.
	Error string
}

// paramOption is one choice of a select.
type paramOption struct {
	Value, Label string
	Selected     bool
}

// DescribedBy is the ids of the texts that describe the input, for its
// aria-describedby: its help and its error.
func (p paramInput) DescribedBy() string {
	var ids []string
	if p.Description != "" {
		ids = append(ids, p.ID+"-help")
	}
	if p.Error != "" {
		ids = append(ids, p.ID+"-error")
	}
	return strings.Join(ids, " ")
}

// plainName is a parameter name that makes a readable id as it is.
var plainName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// paramInputs are the inputs of the parameters schema declares, holding the
// values posted (by parameter name) when posted is set, else the defaults;
// errs are the refusals to show, by parameter name.
func paramInputs(schema map[string]any, posted url.Values, isPost bool, errs map[string]string) []paramInput {
	props, _ := schema["properties"].(map[string]any)
	fields := worktype.Fields(schema)
	out := make([]paramInput, 0, len(fields))
	for i, f := range fields {
		in := paramInput{Field: f, FormName: paramPrefix + f.Name, Kind: inputKind(f), Error: errs[f.Name]}
		in.ID = "param-" + f.Name
		if !plainName.MatchString(f.Name) {
			in.ID = "param-" + strconv.Itoa(i)
		}
		in.TypeText = typeText(f, in.Kind)
		value := valueText(f.Default)
		if isPost {
			value = posted.Get(f.Name)
		}
		switch in.Kind {
		case kindCheckbox:
			in.Checked = value == "true"
		case kindSelect:
			in.Options = enumOptions(f, value)
		case kindNumber:
			in.Step = "any"
			if f.Type == "integer" {
				in.Step = "1"
			}
			prop, _ := props[f.Name].(map[string]any)
			in.Min, in.Max = valueText(number(prop["minimum"])), valueText(number(prop["maximum"]))
		}
		in.Value = value
		out = append(out, in)
	}
	return out
}

// number is v when it is a number, else nil.
func number(v any) any {
	if _, ok := v.(float64); ok {
		return v
	}
	return nil
}

// inputKind is the input that takes f.
func inputKind(f worktype.Field) string {
	switch {
	case f.Type == "boolean":
		return kindCheckbox
	case f.Type == "object":
		return kindJSON
	case f.Type == "array":
		if f.Items == "object" || f.Items == "array" {
			return kindJSON
		}
		return kindList
	case len(f.Enum) > 0:
		return kindSelect
	case f.Type == "integer" || f.Type == "number":
		return kindNumber
	}
	return kindText
}

// typeText says what an input of kind takes.
func typeText(f worktype.Field, kind string) string {
	switch kind {
	case kindList:
		items := f.Items
		if items == "" {
			items = "text"
		}
		if len(f.Enum) > 0 {
			return "list of " + worktype.Enumerate(f.Enum) + ", comma-separated"
		}
		return "list of " + items + ", comma-separated"
	case kindText:
		if f.Type == "" {
			return "text"
		}
	}
	return f.Type
}

// enumOptions are the choices of f's select, value selected; an empty first
// choice unless f is required and has a default.
func enumOptions(f worktype.Field, value string) []paramOption {
	var out []paramOption
	if !f.Required || f.Default == nil {
		label := "— not given"
		if f.Required {
			label = "choose…"
		}
		out = append(out, paramOption{Label: label, Selected: value == ""})
	}
	for _, e := range f.Enum {
		v := valueText(e)
		out = append(out, paramOption{Value: v, Label: v, Selected: v == value})
	}
	return out
}

// valueText is a value decoded from JSON as an input holds it: a string as it
// is, a number in the shortest form, an array's items comma-separated; nil is
// "".
func valueText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = valueText(e)
		}
		return strings.Join(parts, ", ")
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// formParams converts the inputs' values (by parameter name) to the types the
// schema's fields declare, with worktype.Field.Convert: an empty input is left
// out, an unchecked checkbox is false, a list's items lose the spaces around
// them. errs are the values refused, by parameter name.
func formParams(fields []worktype.Field, values url.Values) (params map[string]any, errs map[string]string) {
	params, errs = map[string]any{}, map[string]string{}
	for _, f := range fields {
		kind := inputKind(f)
		text := values.Get(f.Name)
		switch kind {
		case kindJSON:
			continue
		case kindCheckbox:
			text = strconv.FormatBool(text == "true")
		case kindList:
			items := strings.Split(text, ",")
			for i := range items {
				items[i] = strings.TrimSpace(items[i])
			}
			text = strings.Join(items, ",")
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		v, err := f.Convert(text)
		if err != nil {
			errs[f.Name] = err.Error()
			continue
		}
		params[f.Name] = v
	}
	return params, errs
}

// postedParams are a form's parameter values, by parameter name.
func postedParams(form url.Values) url.Values {
	out := url.Values{}
	for k, v := range form {
		if name, ok := strings.CutPrefix(k, paramPrefix); ok && name != "" {
			out[name] = v
		}
	}
	return out
}
