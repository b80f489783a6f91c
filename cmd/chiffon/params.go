package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/chiffon-dev/chiffon/envelope"
)

// parseKeyValues merges a JSON object and k=v / k:=JSON pairs into one map, the
// later pairs over the earlier ones. Without a schema each k=v is a string; with
// one, a k=v is read as its field's type (paramtypes.go), and a name the schema
// refuses is an error, as the orchestrator would answer it.
func parseKeyValues(baseJSON string, pairs []string, s *paramSchema) (map[string]any, error) {
	m := map[string]any{}
	if baseJSON != "" {
		d := json.NewDecoder(strings.NewReader(baseJSON))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			return nil, fmt.Errorf("not a JSON object: %v", err)
		}
	}
	for _, kv := range pairs {
		k, v, text, err := parseKeyValue(kv)
		if err != nil {
			return nil, err
		}
		if text && s != nil {
			if v, err = s.convert(k, v.(string)); err != nil {
				return nil, err
			}
		}
		m[k] = v
	}
	if s != nil {
		if err := s.checkNames(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// parseKeyValue reads one k=v (a string; text is true) or k:=JSON (any value).
func parseKeyValue(kv string) (k string, v any, text bool, err error) {
	if k, raw, ok := strings.Cut(kv, ":="); ok && k != "" && !strings.Contains(k, "=") {
		d := json.NewDecoder(strings.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return "", nil, false, fmt.Errorf("%s: value is not JSON: %v", k, err)
		}
		return k, v, false, nil
	}
	k, s, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return "", nil, false, fmt.Errorf("%q: want key=value or key:=JSON", kv)
	}
	return k, s, true, nil
}

// isTextPair reports whether kv is a k=v (not a k:=JSON): one that a schema
// may type.
func isTextPair(kv string) bool {
	_, _, text, err := parseKeyValue(kv)
	return err == nil && text
}

// parseHints reads hint pairs; the integer hints accept k=v as well as k:=v.
// gpu_vram_mb, which is no hint of the protocol's (a task's goes in its
// work_request's x_custom_fields), is kept in Extra as an integer.
func parseHints(pairs []string) (*envelope.Hints, error) {
	h := &envelope.Hints{}
	for _, kv := range pairs {
		k, v, _, err := parseKeyValue(kv)
		if err != nil {
			return nil, err
		}
		switch k {
		case "max_duration_seconds", "max_memory_mb", envelope.KeyGPUVRAMMB:
			n, err := strconv.ParseInt(fmt.Sprint(v), 10, 64)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("%s must be a positive integer, got %q", k, fmt.Sprint(v))
			}
			switch k {
			case "max_duration_seconds":
				h.MaxDurationSeconds = n
			case "max_memory_mb":
				h.MaxMemoryMB = n
			default:
				if h.Extra == nil {
					h.Extra = map[string]json.RawMessage{}
				}
				h.Extra[k] = json.RawMessage(strconv.FormatInt(n, 10))
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
