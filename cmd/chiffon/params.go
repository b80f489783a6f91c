package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/chiffon-dev/chiffon/envelope"
)

// parseKeyValues merges a JSON object and k=v / k:=JSON pairs into one map.
func parseKeyValues(baseJSON string, pairs []string) (map[string]any, error) {
	m := map[string]any{}
	if baseJSON != "" {
		d := json.NewDecoder(strings.NewReader(baseJSON))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			return nil, fmt.Errorf("not a JSON object: %v", err)
		}
	}
	for _, kv := range pairs {
		k, v, err := parseKeyValue(kv)
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

// parseKeyValue reads one k=v (a string) or k:=JSON (any value).
func parseKeyValue(kv string) (string, any, error) {
	if k, raw, ok := strings.Cut(kv, ":="); ok && k != "" && !strings.Contains(k, "=") {
		d := json.NewDecoder(strings.NewReader(raw))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return "", nil, fmt.Errorf("%s: value is not JSON: %v", k, err)
		}
		return k, v, nil
	}
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return "", nil, fmt.Errorf("%q: want key=value or key:=JSON", kv)
	}
	return k, v, nil
}

// parseHints reads hint pairs; the integer hints accept k=v as well as k:=v.
func parseHints(pairs []string) (*envelope.Hints, error) {
	h := &envelope.Hints{}
	for _, kv := range pairs {
		k, v, err := parseKeyValue(kv)
		if err != nil {
			return nil, err
		}
		switch k {
		case "max_duration_seconds", "max_memory_mb":
			var n int64
			if _, err := fmt.Sscan(fmt.Sprint(v), &n); err != nil || n <= 0 {
				return nil, fmt.Errorf("%s must be a positive integer", k)
			}
			if k == "max_duration_seconds" {
				h.MaxDurationSeconds = n
			} else {
				h.MaxMemoryMB = n
			}
		case "agent_id":
			h.AgentID = fmt.Sprint(v)
		default:
			raw, _ := json.Marshal(v)
			if h.Extra == nil {
				h.Extra = map[string]json.RawMessage{}
			}
			h.Extra[k] = raw
		}
	}
	return h, nil
}
