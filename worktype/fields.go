package worktype

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Field is one top-level property of a parameter schema, as a form or a command
// line shows it.
type Field struct {
	Name string
	// Type is the JSON type: string, integer, number, boolean, array or object;
	// "" when the schema does not say.
	Type string
	// Items is the type of an array's items, when Type is array.
	Items string
	// Enum are the allowed values, when the schema lists them (for an array, its
	// items').
	Enum []any
	// Default is the schema's default, or nil.
	Default any
	// Description is the property's description.
	Description string
	// Required says the parameters must hold it.
	Required bool
}

// Fields lists the top-level properties of schema, required ones first, each
// group by name. A schema without properties has none.
func Fields(schema map[string]any) []Field {
	props, _ := schema["properties"].(map[string]any)
	required := map[string]bool{}
	if list, ok := schema["required"].([]any); ok {
		for _, r := range list {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	out := make([]Field, 0, len(props))
	for _, name := range slices.Sorted(maps.Keys(props)) {
		p, _ := props[name].(map[string]any)
		f := Field{Name: name, Type: typeOf(p), Required: required[name], Default: p["default"]}
		f.Description, _ = p["description"].(string)
		f.Enum, _ = p["enum"].([]any)
		if f.Type == "array" {
			items, _ := p["items"].(map[string]any)
			f.Items = typeOf(items)
			if f.Enum == nil {
				f.Enum, _ = items["enum"].([]any)
			}
		}
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b Field) int {
		switch {
		case a.Required == b.Required:
			return 0
		case a.Required:
			return -1
		}
		return 1
	})
	return out
}

// typeOf is the JSON type a property schema names: its "type", the first
// non-null one of a list, or the type of its enum's or const's values.
func typeOf(p map[string]any) string {
	switch t := p["type"].(type) {
	case string:
		return t
	case []any:
		for _, v := range t {
			if s, ok := v.(string); ok && s != "null" {
				return s
			}
		}
	}
	if enum, ok := p["enum"].([]any); ok && len(enum) > 0 {
		return jsonType(enum[0])
	}
	if c, ok := p["const"]; ok {
		return jsonType(c)
	}
	return ""
}

// jsonType is the JSON type of a decoded value.
func jsonType(v any) string {
	switch n := v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		if _, err := n.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case float64:
		if n == float64(int64(n)) {
			return "integer"
		}
		return "number"
	case int, int64:
		return "integer"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return ""
}

// Convert reads s, a value given as text (on a command line, in a form), as f's
// type: a whole number for integer, a number, true or false, or for an array
// its comma-separated items as the items' type. A string or an untyped field
// keeps s. The value must be one of f.Enum when it lists them; an error says
// what was wanted.
func (f Field) Convert(s string) (any, error) {
	if f.Type == "array" {
		var out []any
		if s != "" {
			for _, part := range strings.Split(s, ",") {
				v, err := scalar(f.Items, f.Enum, part)
				if err != nil {
					return nil, fmt.Errorf("item %q: %w", part, err)
				}
				out = append(out, v)
			}
		}
		return out, nil
	}
	return scalar(f.Type, f.Enum, s)
}

// scalar reads s as typ and checks it against enum.
func scalar(typ string, enum []any, s string) (any, error) {
	var v any = s
	switch typ {
	case "integer":
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("want an integer, got %q", s)
		}
		v = n
	case "number":
		n, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, fmt.Errorf("want a number, got %q", s)
		}
		v = n
	case "boolean":
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("want true or false, got %q", s)
		}
		v = b
	case "object", "array":
		return nil, fmt.Errorf("want JSON %s: give it as name:=JSON", typ)
	}
	if len(enum) > 0 && !slices.ContainsFunc(enum, func(e any) bool { return sameValue(e, v) }) {
		return nil, fmt.Errorf("must be one of %s, got %q", Enumerate(enum), s)
	}
	return v, nil
}

// sameValue compares an enum value as decoded from JSON with a converted one.
func sameValue(e, v any) bool {
	a, err1 := json.Marshal(e)
	b, err2 := json.Marshal(v)
	if err1 != nil || err2 != nil {
		return false
	}
	if fa, err := strconv.ParseFloat(string(a), 64); err == nil {
		fb, err := strconv.ParseFloat(string(b), 64)
		return err == nil && fa == fb
	}
	return string(a) == string(b)
}

// Enumerate writes enum values as JSON, comma-separated: "a", "b", 3.
func Enumerate(enum []any) string {
	parts := make([]string, len(enum))
	for i, e := range enum {
		b, _ := json.Marshal(e)
		parts[i] = string(b)
	}
	return strings.Join(parts, ", ")
}
