package envelope_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
)

// TestDecodeErrorMessagesAreUnchanged pins the exact code, field and message of the
// error for one input down each path of the decoder. The expected errors were written
// by the decoder before its single-pass rewrite; senders read these messages, and
// some match on them.
func TestDecodeErrorMessagesAreUnchanged(t *testing.T) {
	wr := func(edits ...edit) []byte { return envJSON(envelope.TypeWorkRequest, edits...) }
	ws := func(edits ...edit) []byte { return envJSON(envelope.TypeWorkStatus, edits...) }
	wre := func(edits ...edit) []byte { return envJSON(envelope.TypeWorkResult, edits...) }
	ty := envJSON
	cases := []struct {
		name  string
		in    []byte
		dec   *envelope.Decoder // nil for the default one
		code  errcodes.Code
		field string
		msg   string
	}{
		{"not UTF-8", []byte("{\"a\":\"\xff\"}"), nil, errcodes.InvalidMessage, "",
			"message is not valid UTF-8"},
		{"not UTF-8 nor JSON", []byte("\xff{"), nil, errcodes.InvalidMessage, "",
			"message is not valid UTF-8"},
		{"not JSON", []byte(`{"a":}`), nil, errcodes.InvalidMessage, "",
			"message is not valid JSON"},
		{"empty", []byte(``), nil, errcodes.InvalidMessage, "",
			"message is not valid JSON"},
		{"array", []byte(` [1,2]`), nil, errcodes.InvalidMessage, "",
			"message is not a JSON object, got array"},
		{"string", []byte(`"x"`), nil, errcodes.InvalidMessage, "",
			"message is not a JSON object, got string"},
		{"null", []byte(`null`), nil, errcodes.InvalidMessage, "",
			"message is not a JSON object, got null"},
		{"number", []byte(`12`), nil, errcodes.InvalidMessage, "",
			"message is not a JSON object, got number"},
		{"boolean", []byte(`true`), nil, errcodes.InvalidMessage, "",
			"message is not a JSON object, got boolean"},
		{"version missing", wr(del("protocol_version")), nil, errcodes.InvalidMessage, "protocol_version",
			"required field is missing"},
		{"version null", wr(set("protocol_version", nil)), nil, errcodes.InvalidMessage, "protocol_version",
			"must not be null"},
		{"version number", wr(set("protocol_version", raw(`1.0`))), nil, errcodes.InvalidMessage, "protocol_version",
			"must be a string, got number"},
		{"version syntax", wr(set("protocol_version", "1")), nil, errcodes.InvalidMessage, "protocol_version",
			"must be MAJOR.MINOR such as \"1.0\", got \"1\""},
		{"version escaped", splice(wr(), `"1.0"`, `"1\u002e5"`), nil, errcodes.UnsupportedWorkType, "protocol_version",
			"unsupported protocol_version \"1.5\""},
		{"version unsupported", wr(set("protocol_version", "2.0")), nil, errcodes.UnsupportedWorkType, "protocol_version",
			"unsupported protocol_version \"2.0\""},
		{"version not of a custom decoder", wr(), &envelope.Decoder{Versions: []string{"2.0", "2.1"}}, errcodes.UnsupportedWorkType, "protocol_version",
			"unsupported protocol_version \"1.0\""},
		{"message_id not a UUID", wr(set("message_id", "550e8400-e29b-41d4-a716-44665544000")), nil, errcodes.InvalidMessage, "message_id",
			"must be a UUID in 8-4-4-4-12 hex form, got \"550e8400-e29b-41d4-a716-44665544000\""},
		{"message_id dashes moved", wr(set("message_id", "550e8400e-29b-41d4-a716-44665544000")), nil, errcodes.InvalidMessage, "message_id",
			"must be a UUID in 8-4-4-4-12 hex form, got \"550e8400e-29b-41d4-a716-44665544000\""},
		{"message_id escaped not a UUID", splice(wr(), `"`+msgID+`"`, `"\u0035\u0035"`), nil, errcodes.InvalidMessage, "message_id",
			"must be a UUID in 8-4-4-4-12 hex form, got \"55\""},
		{"message_id object", wr(set("message_id", map[string]any{})), nil, errcodes.InvalidMessage, "message_id",
			"must be a string, got object"},
		{"from_agent unknown", wr(set("from_agent", "worker")), nil, errcodes.InvalidMessage, "from_agent",
			"must be one of orchestrator, infra, desktop, code, research, got \"worker\""},
		{"from_agent upper", wr(set("from_agent", "Infra")), nil, errcodes.InvalidMessage, "from_agent",
			"must be one of orchestrator, infra, desktop, code, research, got \"Infra\""},
		{"to_agent missing", wr(del("to_agent")), nil, errcodes.InvalidMessage, "to_agent",
			"required field is missing"},
		{"timestamp bad", wr(set("timestamp", "yesterday")), nil, errcodes.InvalidMessage, "timestamp",
			"must be an RFC 3339 date-time with a zone, such as 2026-01-19T04:21:04Z"},
		{"timestamp naive", wr(set("timestamp", "2026-01-19T04:21:04")), nil, errcodes.InvalidMessage, "timestamp",
			"\"2026-01-19T04:21:04\" has no zone: add Z (UTC) or an offset such as +02:00"},
		{"timestamp hour", wr(set("timestamp", "2026-01-19T24:21:04Z")), nil, errcodes.InvalidMessage, "timestamp",
			"time of day out of range in \"2026-01-19T24:21:04Z\""},
		{"timestamp offset", wr(set("timestamp", "2026-01-19T04:21:04+24:00")), nil, errcodes.InvalidMessage, "timestamp",
			"zone offset out of range in \"2026-01-19T04:21:04+24:00\""},
		{"timestamp day", wr(set("timestamp", "2026-02-30T04:21:04Z")), nil, errcodes.InvalidMessage, "timestamp",
			"not a valid date-time: \"2026-02-30T04:21:04Z\""},
		{"timestamp year", wr(set("timestamp", "0000-01-01T00:00:00+01:00")), nil, errcodes.InvalidMessage, "timestamp",
			"\"0000-01-01T00:00:00+01:00\" is outside years 0000-9999 in UTC"},
		{"timestamp lower t", wr(set("timestamp", "2026-01-19t04:21:04Z")), nil, errcodes.InvalidMessage, "timestamp",
			"must be an RFC 3339 date-time with a zone, such as 2026-01-19T04:21:04Z"},
		{"timestamp empty fraction", wr(set("timestamp", "2026-01-19T04:21:04.Z")), nil, errcodes.InvalidMessage, "timestamp",
			"must be an RFC 3339 date-time with a zone, such as 2026-01-19T04:21:04Z"},
		{"timestamp number", wr(set("timestamp", raw(`1700000000`))), nil, errcodes.InvalidMessage, "timestamp",
			"must be a string, got number"},
		{"type unknown", wr(set("type", "work_order")), nil, errcodes.InvalidMessage, "type",
			"unknown message type \"work_order\""},
		{"type array", wr(set("type", raw(`["work_request"]`))), nil, errcodes.InvalidMessage, "type",
			"must be a string, got array"},
		{"payload missing", wr(del("payload")), nil, errcodes.InvalidMessage, "payload",
			"required field is missing"},
		{"payload array", wr(set("payload", raw(`[]`))), nil, errcodes.InvalidMessage, "payload",
			"must be an object, got array"},
		{"payload null", wr(set("payload", nil)), nil, errcodes.InvalidMessage, "payload",
			"must not be null"},
		{"x_custom_fields array", wr(set("x_custom_fields", raw(`[1]`))), nil, errcodes.InvalidMessage, "x_custom_fields",
			"must be an object, got array"},
		{"x_custom_fields string", wr(set("x_custom_fields", "a")), nil, errcodes.InvalidMessage, "x_custom_fields",
			"must be an object, got string"},
		{"unknown key", wr(set("zeta", 1)), nil, errcodes.InvalidMessage, "zeta",
			"unknown field \"zeta\""},
		{"unknown keys sorted", wr(set("zeta", 1), set("beta", 2), set("Alpha", 3)), nil, errcodes.InvalidMessage, "Alpha",
			"unknown field \"Alpha\""},
		{"legacy priority", wr(set("priority", 1)), nil, errcodes.InvalidMessage, "priority",
			"unknown field \"priority\": Chiffon has no priority field"},
		{"legacy context", ty(envelope.TypeError, set("payload.context", map[string]any{})), nil, errcodes.InvalidMessage, "payload.context",
			"unknown field \"context\": error details go in error_context"},
		{"unknown escaped key", splice(wr(), `{"from_agent"`, `{"x\u0079z":1,"from_agent"`), nil, errcodes.InvalidMessage, "xyz",
			"unknown field \"xyz\""},
		{"repeated key, last invalid", splice(wr(), `"from_agent":"orchestrator"`, `"from_agent":"orchestrator","from_agent":"robot"`), nil, errcodes.InvalidMessage, "from_agent",
			"must be one of orchestrator, infra, desktop, code, research, got \"robot\""},
		{"repeated key, last null", splice(wr(), `"from_agent":"orchestrator"`, `"from_agent":"orchestrator","from_agent":null`), nil, errcodes.InvalidMessage, "from_agent",
			"must not be null"},
		{"escaped known key repeated", splice(wr(), `"from_agent":"orchestrator"`, `"from_agent":"orchestrator","from\u005fagent":"nobody"`), nil, errcodes.InvalidMessage, "from_agent",
			"must be one of orchestrator, infra, desktop, code, research, got \"nobody\""},
		{"task_id bad", wr(set("payload.task_id", "t-1")), nil, errcodes.InvalidMessage, "payload.task_id",
			"must be a UUID in 8-4-4-4-12 hex form, got \"t-1\""},
		{"work_type upper", wr(set("payload.work_type", "Run")), nil, errcodes.InvalidMessage, "payload.work_type",
			"must start with a lower-case letter"},
		{"work_type empty", wr(set("payload.work_type", "")), nil, errcodes.InvalidMessage, "payload.work_type",
			"must not be empty"},
		{"work_type long", wr(set("payload.work_type", strings.Repeat("a", 65))), nil, errcodes.InvalidMessage, "payload.work_type",
			"must be at most 64 characters"},
		{"work_type dash", wr(set("payload.work_type", "run-it")), nil, errcodes.InvalidMessage, "payload.work_type",
			"must match [a-z][a-z0-9_]*, got \"run-it\""},
		{"parameters array", wr(set("payload.parameters", raw(`[]`))), nil, errcodes.InvalidMessage, "payload.parameters",
			"must be an object, got array"},
		{"hints array", wr(set("payload.hints", raw(`[]`))), nil, errcodes.InvalidMessage, "payload.hints",
			"must be an object, got array"},
		{"hints zero", wr(set("payload.hints.max_duration_seconds", 0)), nil, errcodes.InvalidMessage, "payload.hints.max_duration_seconds",
			"must be between 1 and 1099511627776, got 0"},
		{"hints fraction", wr(set("payload.hints.max_duration_seconds", raw(`1.5`))), nil, errcodes.InvalidMessage, "payload.hints.max_duration_seconds",
			"must be an integer, got 1.5"},
		{"hints exponent", wr(set("payload.hints.max_memory_mb", raw(`1e3`))), nil, errcodes.InvalidMessage, "payload.hints.max_memory_mb",
			"must be an integer, got 1e3"},
		{"hints string", wr(set("payload.hints.max_memory_mb", "512")), nil, errcodes.InvalidMessage, "payload.hints.max_memory_mb",
			"must be an integer, got string"},
		{"hints out of range", wr(set("payload.hints.max_memory_mb", raw(`99999999999999999999`))), nil, errcodes.InvalidMessage, "payload.hints.max_memory_mb",
			"integer out of range: 99999999999999999999"},
		{"hints agent_id", wr(set("payload.hints.agent_id", "infra 01")), nil, errcodes.InvalidMessage, "payload.hints.agent_id",
			"may hold only letters, digits, '-' and '_', got \"infra 01\""},
		{"hints agent_id empty", wr(set("payload.hints.agent_id", "")), nil, errcodes.InvalidMessage, "payload.hints.agent_id",
			"must not be empty"},
		{"hints agent_id long", wr(set("payload.hints.agent_id", strings.Repeat("a", 65))), nil, errcodes.InvalidMessage, "payload.hints.agent_id",
			"must be at most 64 characters"},
		{"payload unknown key", wr(set("payload.extra", true)), nil, errcodes.InvalidMessage, "payload.extra",
			"unknown field \"extra\""},
		{"status bad", ws(set("payload.status", "done")), nil, errcodes.InvalidMessage, "payload.status",
			"must be one of running, step_completed, paused, got \"done\""},
		{"progress 101", ws(set("payload.progress_percent", 101)), nil, errcodes.InvalidMessage, "payload.progress_percent",
			"must be between 0 and 100, got 101"},
		{"progress negative", ws(set("payload.progress_percent", -1)), nil, errcodes.InvalidMessage, "payload.progress_percent",
			"must be between 0 and 100, got -1"},
		{"progress bool", ws(set("payload.progress_percent", true)), nil, errcodes.InvalidMessage, "payload.progress_percent",
			"must be an integer, got boolean"},
		{"step missing", ws(del("payload.step")), nil, errcodes.InvalidMessage, "payload.step",
			"required field is missing"},
		{"step number negative", ws(set("payload.step.number", -1)), nil, errcodes.InvalidMessage, "payload.step.number",
			"must be between 0 and 9007199254740992, got -1"},
		{"step name missing", ws(del("payload.step.name")), nil, errcodes.InvalidMessage, "payload.step.name",
			"required field is missing"},
		{"step output null", ws(set("payload.step.output", nil)), nil, errcodes.InvalidMessage, "payload.step.output",
			"must not be null"},
		{"step chunk bad", ws(set("payload.step.output_chunk", "bytes 0-1")), nil, errcodes.InvalidMessage, "payload.step.output_chunk",
			"must be \"bytes A-B of N\", got \"bytes 0-1\""},
		{"step chunk length", ws(set("payload.step.output_chunk", "bytes 0-3 of 10")), nil, errcodes.InvalidMessage, "payload.step.output_chunk",
			"range bytes 0-3 of 10 holds 3 bytes but output has 24"},
		{"step unknown key", ws(set("payload.step.lines", 2)), nil, errcodes.InvalidMessage, "payload.step.lines",
			"unknown field \"lines\""},
		{"result completed", wre(set("payload.status", "completed")), nil, errcodes.InvalidMessage, "payload.status",
			"\"completed\" is not a status: use \"success\" (or \"failed\", \"cancelled\")"},
		{"result status bad", wre(set("payload.status", "ok")), nil, errcodes.InvalidMessage, "payload.status",
			"must be one of success, failed, cancelled, got \"ok\""},
		{"result success nonzero", wre(set("payload.exit_code", 2)), nil, errcodes.InvalidMessage, "payload.exit_code",
			"must be 0 when status is success, got 2"},
		{"result failed zero", wre(set("payload.status", "failed")), nil, errcodes.InvalidMessage, "payload.exit_code",
			"must be non-zero when status is failed"},
		{"result exit code float", wre(set("payload.exit_code", raw(`0.0`))), nil, errcodes.InvalidMessage, "payload.exit_code",
			"must be an integer, got 0.0"},
		{"result resources unknown", wre(set("payload.resources_used.gpus", 1)), nil, errcodes.InvalidMessage, "payload.resources_used.gpus",
			"unknown field \"gpus\""},
		{"result resources negative", wre(set("payload.resources_used.cpu_time_ms", -1)), nil, errcodes.InvalidMessage, "payload.resources_used.cpu_time_ms",
			"must be between 0 and 9007199254740992, got -1"},
		{"error code low", ty(envelope.TypeError, set("payload.error_code", 4999)), nil, errcodes.InvalidMessage, "payload.error_code",
			"must be between 5001 and 5999, got 4999"},
		{"error message empty", ty(envelope.TypeError, set("payload.error_message", "")), nil, errcodes.InvalidMessage, "payload.error_message",
			"must not be empty"},
		{"error context array", ty(envelope.TypeError, set("payload.error_context", raw(`[]`))), nil, errcodes.InvalidMessage, "payload.error_context",
			"must be an object, got array"},
		{"register versions empty", ty(envelope.TypeRegister, set("payload.supported_versions", raw(`[]`))), nil, errcodes.InvalidMessage, "payload.supported_versions",
			"must name at least one version"},
		{"register version bad", ty(envelope.TypeRegister, set("payload.supported_versions", raw(`["1.0","1"]`))), nil, errcodes.InvalidMessage, "payload.supported_versions[1]",
			"must be MAJOR.MINOR, got \"1\""},
		{"register versions string", ty(envelope.TypeRegister, set("payload.supported_versions", "1.0")), nil, errcodes.InvalidMessage, "payload.supported_versions",
			"must be an array of strings, got string"},
		{"register work type bad", ty(envelope.TypeRegister, set("payload.work_types", raw(`["ok","Bad"]`))), nil, errcodes.InvalidMessage, "payload.work_types[1]",
			"must start with a lower-case letter"},
		{"register capability number", ty(envelope.TypeRegister, set("payload.capabilities", raw(`["a",1]`))), nil, errcodes.InvalidMessage, "payload.capabilities[1]",
			"must be a string, got number"},
		{"register capability null", ty(envelope.TypeRegister, set("payload.capabilities", raw(`[null]`))), nil, errcodes.InvalidMessage, "payload.capabilities[0]",
			"must be a string, got null"},
		{"register concurrency zero", ty(envelope.TypeRegister, set("payload.max_concurrency", 0)), nil, errcodes.InvalidMessage, "payload.max_concurrency",
			"must be between 1 and 1048576, got 0"},
		{"register resources unknown", ty(envelope.TypeRegister, set("payload.resources.tpus", 1)), nil, errcodes.InvalidMessage, "payload.resources.tpus",
			"unknown field \"tpus\""},
		{"register name number", ty(envelope.TypeRegister, set("payload.name", 1)), nil, errcodes.InvalidMessage, "payload.name",
			"must be a string, got number"},
		{"register agent_id missing", ty(envelope.TypeRegister, del("payload.agent_id")), nil, errcodes.InvalidMessage, "payload.agent_id",
			"required field is missing"},
		{"register_ack version", ty(envelope.TypeRegisterAck, set("payload.protocol_version", "v1")), nil, errcodes.InvalidMessage, "payload.protocol_version",
			"must be MAJOR.MINOR, got \"v1\""},
		{"register_ack orchestrator empty", ty(envelope.TypeRegisterAck, set("payload.orchestrator_id", "")), nil, errcodes.InvalidMessage, "payload.orchestrator_id",
			"must not be empty"},
		{"heartbeat status", ty(envelope.TypeHeartbeat, set("payload.status", "asleep")), nil, errcodes.InvalidMessage, "payload.status",
			"must be one of idle, busy, draining, got \"asleep\""},
		{"heartbeat task ids bad", ty(envelope.TypeHeartbeat, set("payload.active_task_ids", raw(`["`+taskID+`","x"]`))), nil, errcodes.InvalidMessage, "payload.active_task_ids[1]",
			"must be a UUID, got \"x\""},
		{"heartbeat task ids object", ty(envelope.TypeHeartbeat, set("payload.active_task_ids", raw(`{}`))), nil, errcodes.InvalidMessage, "payload.active_task_ids",
			"must be an array of strings, got object"},
		{"discover empty", ty(envelope.TypeDiscover, set("payload.orchestrator_id", "")), nil, errcodes.InvalidMessage, "payload.orchestrator_id",
			"must not be empty"},
		{"cancel reason number", ty(envelope.TypeCancel, set("payload.reason", 3)), nil, errcodes.InvalidMessage, "payload.reason",
			"must be a string, got number"},
		{"ping unknown key", ty(envelope.TypePing, set("payload.x", 1)), nil, errcodes.InvalidMessage, "payload.x",
			"unknown field \"x\""},
		{"drain zero", ty(envelope.TypeDrain, set("payload.timeout_seconds", 0)), nil, errcodes.InvalidMessage, "payload.timeout_seconds",
			"must be between 1 and 2147483648, got 0"},
		{"control_ack command", ty(envelope.TypeControlAck, set("payload.command", "work_request")), nil, errcodes.InvalidMessage, "payload.command",
			"must be one of cancel, ping, drain, got \"work_request\""},
		{"control_ack ok string", ty(envelope.TypeControlAck, set("payload.ok", "yes")), nil, errcodes.InvalidMessage, "payload.ok",
			"must be a boolean, got string"},
		{"control_ack ok null", ty(envelope.TypeControlAck, set("payload.ok", nil)), nil, errcodes.InvalidMessage, "payload.ok",
			"must not be null"},
		{"control_ack agent_status", ty(envelope.TypeControlAck, set("payload.agent_status", "gone")), nil, errcodes.InvalidMessage, "payload.agent_status",
			"must be one of idle, busy, draining, got \"gone\""},
		{"over a decoder's size", wr(set("x_custom_fields", map[string]any{"pad": strings.Repeat("p", 600)})), &envelope.Decoder{MaxSize: 600}, errcodes.InvalidMessage, "payload",
			"envelope is 1135 bytes, over the 600-byte limit"},
		{"whitespace everywhere, then bad task_id", []byte(" {\n\t\"protocol_version\" : \"1.0\" ,\r\n\"payload\" : { \"task_id\" : 7 } } "), nil, errcodes.InvalidMessage, "message_id",
			"required field is missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.dec
			if d == nil {
				d = &envelope.Decoder{}
			}
			e, err := d.Decode(tc.in)
			var pe *errcodes.Error
			if !errors.As(err, &pe) || e != nil {
				t.Fatalf("Decode = %v, %v; want an *errcodes.Error only", e, err)
			}
			if pe.Code != tc.code || pe.Field() != tc.field || pe.Message != tc.msg {
				t.Errorf("Decode failed with %d at %q: %q\nwant %d at %q: %q", pe.Code, pe.Field(), pe.Message, tc.code, tc.field, tc.msg)
			}
		})
	}
}

// splice replaces the first old in b by new, for input json.Marshal does not write:
// escapes, repeated keys.
func splice(b []byte, old, new string) []byte {
	if !strings.Contains(string(b), old) {
		panic("splice: no " + old + " in " + string(b))
	}
	return []byte(strings.Replace(string(b), old, new, 1))
}
