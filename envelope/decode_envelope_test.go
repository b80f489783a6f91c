package envelope_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
)

// wr is the type most envelope-level cases use.
const wr = envelope.TypeWorkRequest

func TestDecodeRequiresEveryEnvelopeField(t *testing.T) {
	fields := []string{"protocol_version", "message_id", "from_agent", "to_agent", "timestamp",
		"trace_id", "request_id", "type", "payload"}
	cases := []decodeCase{valid("all nine fields", envJSON(wr))}
	for _, f := range fields {
		cases = append(cases,
			invalid(f+" missing", f, envJSON(wr, del(f))),
			invalid(f+" null", f, envJSON(wr, set(f, nil))),
		)
	}
	runDecodeCases(t, &envelope.Decoder{}, cases)
}

func TestDecodeRejectsUnknownTopLevelKeys(t *testing.T) {
	runDecodeCases(t, &envelope.Decoder{}, []decodeCase{
		invalid("extra key", "extra", envJSON(wr, set("extra", "x"))),
		invalid("upper-case twin of a known key", "TRACE_ID", envJSON(wr, set("TRACE_ID", traceID))),
		invalid("upper-case key instead of the known one", "trace_id",
			envJSON(wr, del("trace_id"), set("TRACE_ID", traceID))),
		invalid("mixed-case key", "Type", envJSON(wr, set("Type", "work_request"))),
		invalid("upper-case payload key", "payload.TASK_ID", envJSON(wr, set("payload.TASK_ID", taskID))),
		invalid("spec's field outside x_custom_fields", "custom", envJSON(wr, set("custom", map[string]any{}))),
	})
}

func TestDecodeXCustomFields(t *testing.T) {
	runDecodeCases(t, &envelope.Decoder{}, []decodeCase{
		validThen("absent", envJSON(wr), func(t *testing.T, e *envelope.Envelope) {
			if e.XCustomFields != nil {
				t.Errorf("XCustomFields = %v, want nil", e.XCustomFields)
			}
		}),
		valid("empty object", envJSON(wr, set("x_custom_fields", map[string]any{}))),
		validThen("object with numbers kept exact", envJSON(wr, set("x_custom_fields", raw(`{"n":12345678901234567890,"f":1.50}`))),
			func(t *testing.T, e *envelope.Envelope) {
				if got := e.XCustomFields["n"]; got != jsonNumber("12345678901234567890") {
					t.Errorf("n = %#v", got)
				}
				if got := e.XCustomFields["f"]; got != jsonNumber("1.50") {
					t.Errorf("f = %#v", got)
				}
			}),
		invalid("null", "x_custom_fields", envJSON(wr, set("x_custom_fields", nil))),
		invalid("array", "x_custom_fields", envJSON(wr, set("x_custom_fields", []any{}))),
		invalid("string", "x_custom_fields", envJSON(wr, set("x_custom_fields", "{}"))),
	})
}

func TestDecodeProtocolVersion(t *testing.T) {
	pv := func(v any) []byte { return envJSON(wr, set("protocol_version", v)) }
	unsupported := func(name string, in []byte) decodeCase {
		return decodeCase{name: name, in: in, code: errcodes.UnsupportedWorkType, field: "protocol_version"}
	}
	runDecodeCases(t, &envelope.Decoder{}, []decodeCase{
		valid("1.0", pv("1.0")),
		unsupported("1.1 well-formed, not spoken", pv("1.1")),
		unsupported("0.9 well-formed, not spoken", pv("0.9")),
		unsupported("2.0 well-formed, not spoken", pv("2.0")),
		// A newer sender hears 5006 even when its message breaks this version's rules.
		unsupported("2.0 with an unknown key", envJSON(wr, set("protocol_version", "2.0"), set("new_field", 1))),
		unsupported("2.0 alone", []byte(`{"protocol_version":"2.0"}`)),
		invalid("number 1", "protocol_version", pv(raw(`1`))),
		invalid("number 1.0", "protocol_version", pv(raw(`1.0`))),
		invalid(`"1"`, "protocol_version", pv("1")),
		invalid(`"v1"`, "protocol_version", pv("v1")),
		invalid(`"v1.0"`, "protocol_version", pv("v1.0")),
		invalid(`trailing space`, "protocol_version", pv("1.0 ")),
		invalid(`leading space`, "protocol_version", pv(" 1.0")),
		invalid(`"1.0.0"`, "protocol_version", pv("1.0.0")),
		invalid(`"1."`, "protocol_version", pv("1.")),
		invalid(`".0"`, "protocol_version", pv(".0")),
		invalid(`"-1.0"`, "protocol_version", pv("-1.0")),
		invalid(`empty`, "protocol_version", pv("")),
	})
}

func TestDecodeVersionsOfACustomDecoder(t *testing.T) {
	d := &envelope.Decoder{Versions: []string{"1.0", "1.1"}}
	runDecodeCases(t, d, []decodeCase{
		valid("1.1 spoken", envJSON(wr, set("protocol_version", "1.1"))),
		{name: "2.0 not spoken", in: envJSON(wr, set("protocol_version", "2.0")),
			code: errcodes.UnsupportedWorkType, field: "protocol_version"},
	})
}

func TestDecodeUUIDs(t *testing.T) {
	const upper = "550E8400-E29B-41D4-A716-44665544000A"
	var cases []decodeCase
	for _, f := range []string{"message_id", "trace_id", "request_id", "payload.task_id"} {
		id := func(v any) []byte { return envJSON(wr, set(f, v)) }
		cases = append(cases,
			validThen(f+" upper case accepted, lower-cased", id(upper), func(t *testing.T, e *envelope.Envelope) {
				got := map[string]string{"message_id": e.MessageID, "trace_id": e.TraceID,
					"request_id": e.RequestID, "payload.task_id": e.Payload.(*envelope.WorkRequest).TaskID}[f]
				if got != strings.ToLower(upper) {
					t.Errorf("%s = %q, want it lower-cased", f, got)
				}
			}),
			valid(f+" nil UUID", id("00000000-0000-0000-0000-000000000000")),
			invalid(f+" braces", f, id("{550e8400-e29b-41d4-a716-446655440001}")),
			invalid(f+" urn:uuid:", f, id("urn:uuid:550e8400-e29b-41d4-a716-446655440001")),
			invalid(f+" hyphenless", f, id("550e8400e29b41d4a716446655440001")),
			invalid(f+" one short", f, id("550e8400-e29b-41d4-a716-44665544000")),
			invalid(f+" one long", f, id("550e8400-e29b-41d4-a716-4466554400011")),
			invalid(f+" hyphen moved", f, id("550e840-0e29b-41d4-a716-446655440001")),
			invalid(f+" non-hex digit", f, id("550e8400-e29b-41d4-a716-44665544000g")),
			invalid(f+" surrounding space", f, id(" 550e8400-e29b-41d4-a716-446655440001")),
			invalid(f+" empty", f, id("")),
			invalid(f+" number", f, id(raw(`550`))),
			invalid(f+" null", f, id(nil)),
		)
	}
	runDecodeCases(t, &envelope.Decoder{}, cases)
}

func TestDecodeAgentTypes(t *testing.T) {
	var cases []decodeCase
	for _, f := range []string{"from_agent", "to_agent"} {
		for _, a := range []string{"orchestrator", "infra", "desktop", "code", "research"} {
			cases = append(cases, valid(f+" "+a, envJSON(wr, set(f, a))))
		}
		for _, a := range []string{"Infra", "INFRA", "agent", "infra ", "", "infra-01"} {
			cases = append(cases, invalid(f+" "+a, f, envJSON(wr, set(f, a))))
		}
		cases = append(cases, invalid(f+" number", f, envJSON(wr, set(f, raw(`1`)))))
	}
	runDecodeCases(t, &envelope.Decoder{}, cases)
}

func TestDecodeMessageTypes(t *testing.T) {
	types := []envelope.Type{
		envelope.TypeWorkRequest, envelope.TypeWorkStatus, envelope.TypeWorkResult, envelope.TypeError,
		envelope.TypeRegister, envelope.TypeRegisterAck, envelope.TypeHeartbeat, envelope.TypeDiscover,
		envelope.TypeCancel, envelope.TypePing, envelope.TypeDrain, envelope.TypeControlAck,
	}
	var cases []decodeCase
	for _, typ := range types {
		cases = append(cases, validThen(string(typ), envJSON(typ), func(t *testing.T, e *envelope.Envelope) {
			if e.Type != typ || e.Payload.MessageType() != typ {
				t.Errorf("type %q with a %s payload, want %q", e.Type, e.Payload.MessageType(), typ)
			}
		}))
	}
	for _, typ := range []string{"Work_Request", "WORK_REQUEST", "status", "work_request ", "", "workrequest"} {
		cases = append(cases, invalid("type "+typ, "type", envJSON(wr, set("type", typ))))
	}
	cases = append(cases,
		invalid("type number", "type", envJSON(wr, set("type", raw(`1`)))),
		// A payload of another type is checked against the envelope's type.
		invalid("work_request type with a ping payload", "payload.task_id",
			envJSON(wr, set("payload", map[string]any{}))),
	)
	runDecodeCases(t, &envelope.Decoder{}, cases)
}

func TestDecodePayloadMustBeAnObject(t *testing.T) {
	runDecodeCases(t, &envelope.Decoder{}, []decodeCase{
		invalid("array", "payload", envJSON(wr, set("payload", []any{}))),
		invalid("string", "payload", envJSON(wr, set("payload", "{}"))),
		invalid("number", "payload", envJSON(wr, set("payload", 1))),
		invalid("true", "payload", envJSON(wr, set("payload", true))),
		invalid("null", "payload", envJSON(wr, set("payload", nil))),
	})
}

func TestDecodeNonObjectTextNamesNoField(t *testing.T) {
	texts := map[string]string{
		"empty":             "",
		"spaces":            "   ",
		"array":             "[]",
		"string":            `"work_request"`,
		"number":            "42",
		"null":              "null",
		"true":              "true",
		"truncated object":  `{"protocol_version":"1.0"`,
		"two objects":       `{} {}`,
		"trailing comma":    `{"protocol_version":"1.0",}`,
		"single quotes":     `{'protocol_version':'1.0'}`,
		"invalid UTF-8":     "{\"protocol_version\":\"1.0\xff\"}",
		"byte order mark":   "\uFEFF{}",
		"NaN":               `{"n":NaN}`,
		"comment":           `{/* no */}`,
		"raw control char":  "{\"a\":\"x\ny\"}",
		"lone closing":      "}",
		"unquoted key":      `{protocol_version:"1.0"}`,
		"unterminated str":  `{"a":"b}`,
		"deeply nested arr": strings.Repeat("[", 20000) + strings.Repeat("]", 20000),
	}
	var cases []decodeCase
	for name, text := range texts {
		cases = append(cases, invalid(name, "", []byte(text)))
	}
	runDecodeCases(t, &envelope.Decoder{}, cases)
}

func TestDecodeTimestampGrammar(t *testing.T) {
	ts := func(v any) []byte { return envJSON(wr, set("timestamp", v)) }
	at := func(want string) func(*testing.T, *envelope.Envelope) {
		return func(t *testing.T, e *envelope.Envelope) {
			w, err := time.Parse(time.RFC3339Nano, want)
			if err != nil {
				t.Fatal(err)
			}
			if !e.Timestamp.Equal(w) || e.Timestamp.Location() != time.UTC {
				t.Errorf("timestamp = %v, want %v in UTC", e.Timestamp, w.UTC())
			}
		}
	}
	runDecodeCases(t, &envelope.Decoder{}, []decodeCase{
		validThen("Z", ts("2026-01-19T04:21:04Z"), at("2026-01-19T04:21:04Z")),
		validThen("fraction", ts("2026-01-19T04:21:04.5Z"), at("2026-01-19T04:21:04.5Z")),
		validThen("nanoseconds", ts("2026-01-19T04:21:04.123456789Z"), at("2026-01-19T04:21:04.123456789Z")),
		validThen("positive offset converted to UTC", ts("2026-01-19T06:21:04+02:00"), at("2026-01-19T04:21:04Z")),
		validThen("negative offset across midnight", ts("2026-01-18T22:51:04.25-05:30"), at("2026-01-19T04:21:04.25Z")),
		validThen("-00:00", ts("2026-01-19T04:21:04-00:00"), at("2026-01-19T04:21:04Z")),
		validThen("largest offset", ts("2026-01-19T04:21:04+23:59"), at("2026-01-18T04:22:04Z")),
		valid("leap day", ts("2024-02-29T00:00:00Z")),
		valid("year 0000", ts("0000-01-01T00:00:00Z")),
		valid("year 9999", ts("9999-12-31T23:59:59.999999999Z")),

		invalid("lower-case t", "timestamp", ts("2026-01-19t04:21:04Z")),
		invalid("lower-case z", "timestamp", ts("2026-01-19T04:21:04z")),
		invalid("space for T", "timestamp", ts("2026-01-19 04:21:04Z")),
		invalid("one-digit hour", "timestamp", ts("2026-01-19T4:21:04Z")),
		invalid("one-digit month", "timestamp", ts("2026-1-19T04:21:04Z")),
		invalid("comma before fraction", "timestamp", ts("2026-01-19T04:21:04,5Z")),
		invalid("dot without digits", "timestamp", ts("2026-01-19T04:21:04.Z")),
		invalid("offset hour 24", "timestamp", ts("2026-01-19T04:21:04+24:00")),
		invalid("offset minute 60", "timestamp", ts("2026-01-19T04:21:04+05:60")),
		invalid("offset without colon", "timestamp", ts("2026-01-19T04:21:04+0500")),
		invalid("offset hours only", "timestamp", ts("2026-01-19T04:21:04+05")),
		invalid("offset with seconds", "timestamp", ts("2026-01-19T04:21:04+05:00:00")),
		invalid("zone name", "timestamp", ts("2026-01-19T04:21:04 UTC")),
		invalid("no zone", "timestamp", ts("2026-01-19T04:21:04")),
		invalid("no seconds", "timestamp", ts("2026-01-19T04:21Z")),
		invalid("date alone", "timestamp", ts("2026-01-19")),
		invalid("time alone", "timestamp", ts("04:21:04Z")),
		invalid("hour 24", "timestamp", ts("2026-01-19T24:00:00Z")),
		invalid("minute 60", "timestamp", ts("2026-01-19T04:60:04Z")),
		// RFC 3339 allows a leap second, but Go's time cannot hold one.
		invalid("second 60", "timestamp", ts("2016-12-31T23:59:60Z")),
		invalid("month 13", "timestamp", ts("2026-13-19T04:21:04Z")),
		invalid("February 30", "timestamp", ts("2026-02-30T04:21:04Z")),
		invalid("day 00", "timestamp", ts("2026-01-00T04:21:04Z")),
		invalid("five-digit year", "timestamp", ts("12026-01-19T04:21:04Z")),
		invalid("offset pulls year 0000 below zero", "timestamp", ts("0000-01-01T00:00:00+00:01")),
		invalid("offset pushes year 9999 past 9999", "timestamp", ts("9999-12-31T23:59:59-00:01")),
		invalid("leading space", "timestamp", ts(" 2026-01-19T04:21:04Z")),
		invalid("trailing space", "timestamp", ts("2026-01-19T04:21:04Z ")),
		invalid("unix seconds as a number", "timestamp", ts(raw(`1768796464`))),
		invalid("unix seconds as a string", "timestamp", ts("1768796464")),
		invalid("empty string", "timestamp", ts("")),
		invalid("null", "timestamp", ts(nil)),
	})
}
