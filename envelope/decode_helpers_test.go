package envelope_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
)

// Fixed ids of the envelopes the decode tests build.
const (
	msgID   = "550e8400-e29b-41d4-a716-446655440001"
	traceID = "550e8400-e29b-41d4-a716-446655440002"
	reqID   = "550e8400-e29b-41d4-a716-446655440003"
	taskID  = "550e8400-e29b-41d4-a716-446655440004"
)

// edit changes one member of an envelope under construction.
type edit func(m map[string]any)

// set puts v at a dotted path, creating objects on the way. A json.RawMessage is
// written verbatim, so set("timestamp", raw(`12`)) writes a number and nil writes null.
func set(path string, v any) edit {
	return func(m map[string]any) {
		keys := strings.Split(path, ".")
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[keys[len(keys)-1]] = v
	}
}

// del removes the member at a dotted path.
func del(path string) edit {
	return func(m map[string]any) {
		keys := strings.Split(path, ".")
		for _, k := range keys[:len(keys)-1] {
			m = m[k].(map[string]any)
		}
		delete(m, keys[len(keys)-1])
	}
}

// raw marks a value to be written as this exact JSON text.
func raw(s string) json.RawMessage { return json.RawMessage(s) }

// validPayload returns a fresh valid payload of type typ with every optional field set.
func validPayload(typ envelope.Type) map[string]any {
	resources := map[string]any{"cpu_cores": 4, "memory_mb": 8192, "disk_free_mb": 20480, "gpu_vram_mb": 0}
	switch typ {
	case envelope.TypeWorkRequest:
		return map[string]any{
			"task_id":    taskID,
			"work_type":  "run_playbook",
			"parameters": map[string]any{"playbook": "deploy_kuma.yml", "extra_vars": map[string]any{"version": "1.4.0"}},
			"hints":      map[string]any{"max_duration_seconds": 300, "max_memory_mb": 512},
		}
	case envelope.TypeWorkStatus:
		return map[string]any{
			"task_id":          taskID,
			"status":           "running",
			"progress_percent": 50,
			"step":             map[string]any{"number": 2, "name": "Configure Kuma settings", "output": "Updating config.yaml...\n"},
		}
	case envelope.TypeWorkResult:
		return map[string]any{
			"task_id":        taskID,
			"status":         "success",
			"exit_code":      0,
			"output":         "Deployment completed successfully.\n",
			"resources_used": map[string]any{"duration_seconds": 87, "gpu_vram_mb": 0, "cpu_time_ms": 12450},
		}
	case envelope.TypeError:
		return map[string]any{
			"error_code":    5005,
			"error_message": "Resource limit exceeded",
			"error_context": map[string]any{"limit_name": "gpu_vram_mb", "available": 128, "required": 512},
		}
	case envelope.TypeRegister:
		return map[string]any{
			"agent_id":              "infra-01",
			"name":                  "rack-host-1",
			"supported_versions":    []any{"1.0"},
			"work_types":            []any{"run_playbook", "deploy_service"},
			"capabilities":          []any{"ansible"},
			"max_concurrency":       2,
			"heartbeat_interval_ms": 5000,
			"resources":             resources,
		}
	case envelope.TypeRegisterAck:
		return map[string]any{"agent_id": "infra-01", "orchestrator_id": "orch-a", "protocol_version": "1.0"}
	case envelope.TypeHeartbeat:
		return map[string]any{
			"agent_id":        "infra-01",
			"status":          "busy",
			"active_tasks":    1,
			"max_concurrency": 2,
			"active_task_ids": []any{taskID},
			"resources":       resources,
		}
	case envelope.TypeDiscover:
		return map[string]any{"orchestrator_id": "orch-a"}
	case envelope.TypeCancel:
		return map[string]any{"task_id": taskID, "reason": "operator asked"}
	case envelope.TypePing:
		return map[string]any{}
	case envelope.TypeDrain:
		return map[string]any{"timeout_seconds": 30}
	case envelope.TypeControlAck:
		return map[string]any{"command": "drain", "ok": true, "message": "draining", "agent_status": "draining", "active_tasks": 1}
	}
	panic("validPayload: no payload for type " + string(typ))
}

// envJSON returns a valid envelope of type typ, changed by edits, as JSON.
func envJSON(typ envelope.Type, edits ...edit) []byte {
	m := map[string]any{
		"protocol_version": "1.0",
		"message_id":       msgID,
		"from_agent":       "orchestrator",
		"to_agent":         "infra",
		"timestamp":        "2026-01-19T04:21:04Z",
		"trace_id":         traceID,
		"request_id":       reqID,
		"type":             string(typ),
		"payload":          validPayload(typ),
	}
	for _, e := range edits {
		e(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// decodeCase is one input for the decoder and what it must make of it.
type decodeCase struct {
	name string
	in   []byte
	// code is the error expected, 0 when the input is valid.
	code errcodes.Code
	// field is the dotted path the error must name; "" for a non-object input.
	field string
	// check, for a valid input, inspects the decoded envelope.
	check func(t *testing.T, e *envelope.Envelope)
	// msg, when set, must appear in the error message.
	msg string
}

func valid(name string, in []byte) decodeCase { return decodeCase{name: name, in: in} }

func validThen(name string, in []byte, check func(*testing.T, *envelope.Envelope)) decodeCase {
	return decodeCase{name: name, in: in, check: check}
}

// invalid expects a 5003 naming field.
func invalid(name, field string, in []byte) decodeCase {
	return decodeCase{name: name, in: in, code: errcodes.InvalidMessage, field: field}
}

// runDecodeCases decodes each case with d and checks the outcome.
func runDecodeCases(t *testing.T, d *envelope.Decoder, cases []decodeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := d.Decode(tc.in)
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("Decode rejected a valid envelope: %v\ninput: %.400s", err, tc.in)
				}
				if tc.check != nil {
					tc.check(t, e)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode accepted an invalid envelope\ninput: %.400s", tc.in)
			}
			if e != nil {
				t.Errorf("Decode returned an envelope with its error")
			}
			assertProtocolError(t, err, tc.code, tc.field)
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not mention %q", err, tc.msg)
			}
		})
	}
}

// assertProtocolError checks that err is an *errcodes.Error with code and field, and
// that its context carries the field the way the wire format does (null for "").
func assertProtocolError(t *testing.T, err error, code errcodes.Code, field string) {
	t.Helper()
	var pe *errcodes.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not an *errcodes.Error", err, err)
	}
	if pe.Code != code {
		t.Errorf("code = %d, want %d (%v)", pe.Code, code, err)
	}
	if pe.Field() != field {
		t.Errorf("field = %q, want %q (%v)", pe.Field(), field, err)
	}
	if field == "" {
		if v, ok := pe.Context[errcodes.KeyFieldName]; !ok || v != nil {
			t.Errorf("field_name context = %#v, want null", v)
		}
	}
	if code == errcodes.InvalidMessage && pe.Context[errcodes.KeyValidationError] != pe.Message {
		t.Errorf("validation_error context %q differs from message %q", pe.Context[errcodes.KeyValidationError], pe.Message)
	}
}

// jsonNumber is a number as the decoder keeps it in free-form objects.
func jsonNumber(s string) json.Number { return json.Number(s) }
