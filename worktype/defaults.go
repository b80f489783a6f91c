package worktype

import (
	"bytes"
	"encoding/json"
	"maps"
)

// WithDefaults returns params with the "default" of each top-level property of
// schema that params lacks (or holds as null), each as JSON decodes it (numbers
// as json.Number), so that a default looks like a value sent on the wire.
// params itself is returned when nothing is filled in; it is never changed.
func WithDefaults(schema, params map[string]any) map[string]any {
	props, _ := schema["properties"].(map[string]any)
	out, copied := params, false
	for name, p := range props {
		p, _ := p.(map[string]any)
		def, ok := p["default"]
		if !ok || def == nil || params[name] != nil {
			continue
		}
		v, err := asJSON(def)
		if err != nil {
			continue // not JSON: Compile refuses such a schema
		}
		if !copied {
			out, copied = make(map[string]any, len(params)+1), true
			maps.Copy(out, params)
		}
		out[name] = v
	}
	return out
}

// asJSON is v as JSON decodes it, with numbers as json.Number: a copy that
// sharing cannot change.
func asJSON(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	err = d.Decode(&out)
	return out, err
}
