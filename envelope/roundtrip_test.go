package envelope_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

// envGen generates random valid envelopes. Everything it makes is already in the form
// Decode returns: lower-case ids, UTC timestamps, numbers in free-form objects as
// json.Number, and empty optional collections as nil.
type envGen struct{ r *rand.Rand }

func (g envGen) pick(n int) int             { return g.r.IntN(n) }
func (g envGen) chance() bool               { return g.r.IntN(2) == 0 }
func (g envGen) between(lo, hi int64) int64 { return lo + g.r.Int64N(hi-lo+1) }

func (g envGen) uuid() string {
	const hex = "0123456789abcdef"
	b := make([]byte, 36)
	for i := range b {
		switch i {
		case 8, 13, 18, 23:
			b[i] = '-'
		default:
			b[i] = hex[g.pick(16)]
		}
	}
	return string(b)
}

// textRunes are the characters strings are made of: plain text, JSON's escapes, HTML
// characters Encode must not escape, multi-byte runes, and U+2028.
var textRunes = []rune("abcXYZ 019_-.:/\n\t\r\"\\<>&'\x00\x01\x1f\x7féü€😀\u2028\u2029\uFFFD")

func (g envGen) text(maxRunes int) string {
	n := g.pick(maxRunes + 1)
	var b strings.Builder
	for range n {
		b.WriteRune(textRunes[g.pick(len(textRunes))])
	}
	return b.String()
}

func (g envGen) ident(alphabet string, first string, maxLen int) string {
	b := []byte{first[g.pick(len(first))]}
	for n := g.pick(maxLen); n > 0; n-- {
		b = append(b, alphabet[g.pick(len(alphabet))])
	}
	return string(b)
}

func (g envGen) workType() string {
	return g.ident("abcdefghijklmnopqrstuvwxyz0123456789_", "abcdefghijklmnopqrstuvwxyz", envelope.MaxWorkTypeLen-1)
}

func (g envGen) agentID() string {
	const a = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
	return g.ident(a, a, envelope.MaxAgentIDLen-1)
}

func (g envGen) agentType() envelope.AgentType {
	return []envelope.AgentType{envelope.Orchestrator, envelope.Infra, envelope.Desktop, envelope.Code, envelope.Research}[g.pick(5)]
}

func (g envGen) timestamp() time.Time {
	// Any instant from 1970 to 9999, to the nanosecond.
	return time.Unix(g.between(0, 253402300799), g.between(0, 999999999)).UTC()
}

func (g envGen) number() json.Number {
	forms := []func() string{
		func() string { return strconv.FormatInt(g.between(-1<<61, 1<<61), 10) },
		func() string { return strconv.FormatFloat(g.r.NormFloat64()*1e6, 'g', -1, 64) },
		func() string { return "1.50" },
		func() string { return "-0" },
		func() string { return "2E-7" },
		func() string { return "123456789012345678901234567890" },
	}
	return json.Number(forms[g.pick(len(forms))]())
}

// value returns a free-form JSON value at most depth levels deep.
func (g envGen) value(depth int) any {
	kinds := 4
	if depth > 0 {
		kinds = 6
	}
	switch g.pick(kinds) {
	case 0:
		return nil
	case 1:
		return g.chance()
	case 2:
		return g.number()
	case 3:
		return g.text(12)
	case 4:
		a := make([]any, g.pick(4))
		for i := range a {
			a[i] = g.value(depth - 1)
		}
		return a
	default:
		m := make(map[string]any) // nested objects stay {} when empty
		for n := g.pick(4); n > 0; n-- {
			m[g.text(6)] = g.value(depth - 1)
		}
		return m
	}
}

// object returns a free-form object; an empty one is nil unless keepEmpty.
func (g envGen) object(keepEmpty bool) map[string]any {
	m := make(map[string]any)
	for n := g.pick(4); n > 0; n-- {
		m[g.text(8)] = g.value(3)
	}
	if len(m) == 0 && !keepEmpty {
		return nil
	}
	return m
}

func (g envGen) strings(lo, hi int, one func() string) []string {
	n := lo + g.pick(hi-lo+1)
	if n == 0 {
		return nil
	}
	s := make([]string, n)
	for i := range s {
		s[i] = one()
	}
	return s
}

func (g envGen) positive() int64 { return g.between(1, 1<<40) }

// labels is nil or up to 4 valid labels.
func (g envGen) labels() map[string]string {
	n := g.pick(5)
	if n == 0 {
		return nil
	}
	out := make(map[string]string, n)
	for range n {
		const printable = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .:/_-\"\\"
		out[g.workType()] = g.ident(printable, printable, 20)
	}
	return out
}

func (g envGen) resources() *envelope.Resources {
	if g.chance() {
		return nil
	}
	return &envelope.Resources{CPUCores: g.between(0, 256), MemoryMB: g.positive(), DiskFreeMB: g.positive(), GPUVRAMMB: g.between(0, 1<<20)}
}

func (g envGen) hints() *envelope.Hints {
	if g.chance() {
		return nil
	}
	h := &envelope.Hints{}
	if g.chance() {
		h.MaxDurationSeconds = g.positive()
	}
	if g.chance() {
		h.MaxMemoryMB = g.positive()
	}
	if g.chance() {
		h.AgentID = g.agentID()
	}
	for n := g.pick(3); n > 0; n-- {
		v, err := json.Marshal(g.value(2))
		if err != nil {
			panic(err)
		}
		if h.Extra == nil {
			h.Extra = map[string]json.RawMessage{}
		}
		h.Extra["x_"+g.workType()] = v
	}
	return h
}

func (g envGen) step() envelope.Step {
	s := envelope.Step{Number: g.between(0, 1<<53), Name: g.text(20), Output: g.text(200)}
	if s.Output != "" && g.chance() {
		start := g.between(0, 1<<40)
		end := start + int64(len(s.Output))
		s.OutputChunk = envelope.ChunkRange{Start: start, End: end, Total: end + g.between(0, 1<<20)}.String()
	}
	return s
}

func (g envGen) workResult() *envelope.WorkResult {
	p := &envelope.WorkResult{TaskID: g.uuid(), Output: g.text(200)}
	switch g.pick(3) {
	case 0:
		p.Status = envelope.ResultSuccess
	case 1:
		p.Status, p.ExitCode = envelope.ResultFailed, []int64{1, 2, 127, 137, -1, 1 << 40}[g.pick(6)]
	default:
		p.Status, p.ExitCode = envelope.ResultCancelled, g.between(-1, 255)
	}
	if g.chance() {
		p.ResourcesUsed = &envelope.ResourcesUsed{DurationSeconds: g.between(0, 1<<40), GPUVRAMMB: g.between(0, 1<<20), CPUTimeMS: g.between(0, 1<<50)}
	}
	return p
}

func (g envGen) agentStatus(allowEmpty bool) string {
	s := []string{envelope.AgentIdle, envelope.AgentBusy, envelope.AgentDraining, ""}
	if allowEmpty {
		return s[g.pick(4)]
	}
	return s[g.pick(3)]
}

func (g envGen) version() string {
	return strconv.Itoa(g.pick(4)) + "." + strconv.Itoa(g.pick(12))
}

// payload returns a random valid payload of type typ.
func (g envGen) payload(typ envelope.Type) envelope.Payload {
	switch typ {
	case envelope.TypeWorkRequest:
		return &envelope.WorkRequest{TaskID: g.uuid(), WorkType: g.workType(), Parameters: g.object(true), Hints: g.hints()}
	case envelope.TypeWorkStatus:
		return &envelope.WorkStatus{TaskID: g.uuid(),
			Status:          []string{envelope.StatusRunning, envelope.StatusStepCompleted, envelope.StatusPaused}[g.pick(3)],
			ProgressPercent: g.pick(101), Step: g.step()}
	case envelope.TypeWorkResult:
		return g.workResult()
	case envelope.TypeError:
		return &envelope.ErrorPayload{ErrorCode: int(g.between(5001, 5999)), ErrorMessage: "e" + g.text(40), ErrorContext: g.object(false)}
	case envelope.TypeRegister:
		return &envelope.Register{AgentID: g.agentID(), Name: g.text(20),
			SupportedVersions: g.strings(1, 3, g.version),
			// work_types is required, so an empty list travels as [] and stays non-nil.
			WorkTypes:      append([]string{}, g.strings(0, 4, g.workType)...),
			Capabilities:   g.strings(0, 3, func() string { return g.text(10) }),
			Labels:         g.labels(),
			MaxConcurrency: int(g.between(1, 1<<20)), HeartbeatIntervalMS: g.between(1, 1<<31), Resources: g.resources()}
	case envelope.TypeRegisterAck:
		return &envelope.RegisterAck{AgentID: g.agentID(), OrchestratorID: "o" + g.text(20), ProtocolVersion: g.version()}
	case envelope.TypeHeartbeat:
		return &envelope.Heartbeat{AgentID: g.agentID(), Status: g.agentStatus(false), ActiveTasks: g.pick(9),
			MaxConcurrency: 1 + g.pick(8), ActiveTaskIDs: g.strings(0, 3, g.uuid), Resources: g.resources()}
	case envelope.TypeDiscover:
		return &envelope.Discover{OrchestratorID: "o" + g.text(20)}
	case envelope.TypeCancel:
		return &envelope.Cancel{TaskID: g.uuid(), Reason: g.text(30)}
	case envelope.TypePing:
		return &envelope.Ping{}
	case envelope.TypeDrain:
		return &envelope.Drain{TimeoutSeconds: g.between(0, 1<<31)}
	case envelope.TypeControlAck:
		return &envelope.ControlAck{Command: []envelope.Type{envelope.TypeCancel, envelope.TypePing, envelope.TypeDrain}[g.pick(3)],
			OK: g.chance(), Message: g.text(30), AgentStatus: g.agentStatus(true), ActiveTasks: g.pick(1 << 20)}
	}
	panic("envGen: no payload for type " + string(typ))
}

// envelope returns a random valid envelope of type typ.
func (g envGen) envelope(typ envelope.Type) *envelope.Envelope {
	return &envelope.Envelope{
		ProtocolVersion: envelope.ProtocolVersion,
		MessageID:       g.uuid(),
		FromAgent:       g.agentType(),
		ToAgent:         g.agentType(),
		Timestamp:       g.timestamp(),
		TraceID:         g.uuid(),
		RequestID:       g.uuid(),
		Type:            typ,
		Payload:         g.payload(typ),
		XCustomFields:   g.object(false),
	}
}

var allTypes = []envelope.Type{
	envelope.TypeWorkRequest, envelope.TypeWorkStatus, envelope.TypeWorkResult, envelope.TypeError,
	envelope.TypeRegister, envelope.TypeRegisterAck, envelope.TypeHeartbeat, envelope.TypeDiscover,
	envelope.TypeCancel, envelope.TypePing, envelope.TypeDrain, envelope.TypeControlAck,
}

func TestEncodeDecodeRoundTripsEveryType(t *testing.T) {
	g := envGen{rand.New(rand.NewPCG(20260119, 5003))}
	const perType = 300
	for _, typ := range allTypes {
		t.Run(string(typ), func(t *testing.T) {
			for i := range perType {
				want := g.envelope(typ)
				b, err := envelope.Encode(want)
				if err != nil {
					t.Fatalf("#%d: Encode: %v", i, err)
				}
				got, err := envelope.Decode(b)
				if err != nil {
					t.Fatalf("#%d: Decode of Encode's output: %v\n%s", i, err, b)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("#%d: round trip changed the envelope\nwant %s\ngot  %s\njson %s", i, dump(want), dump(got), b)
				}
				assertStableEncoding(t, b)
			}
		})
	}
}

// assertStableEncoding decodes b, encodes the result and decodes that again: both
// decodes must agree and both encodings must be the same bytes.
func assertStableEncoding(t *testing.T, b []byte) {
	t.Helper()
	first, err := envelope.Decode(b)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	again, err := envelope.Encode(first)
	if err != nil {
		t.Fatalf("Encode of a decoded envelope: %v", err)
	}
	second, err := envelope.Decode(again)
	if err != nil {
		t.Fatalf("Decode of a re-encoded envelope: %v\n%s", err, again)
	}
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("decode-encode-decode changed the envelope\nfirst  %s\nsecond %s", dump(first), dump(second))
	}
	if !bytes.Equal(b, again) {
		t.Fatalf("encoding is not stable\nfirst  %s\nsecond %s", b, again)
	}
}

func TestDecodeEncodeDecodeNormalizesForeignInput(t *testing.T) {
	// Input written by another implementation: upper-case ids, an offset timestamp,
	// spacing, escapes (a lone surrogate among them) and empty optional members. The first decode normalizes it; from
	// there on, encoding and decoding change nothing.
	inputs := []string{
		`{ "protocol_version" : "1.0", "message_id":"550E8400-E29B-41D4-A716-446655440001",
		  "from_agent":"orchestrator","to_agent":"infra","timestamp":"2026-01-19T06:21:04.500+02:00",
		  "trace_id":"550e8400-e29b-41d4-a716-446655440002","request_id":"550e8400-e29b-41d4-a716-446655440003",
		  "type":"work_request","payload":{"task_id":"550E8400-E29B-41D4-A716-446655440004",
		  "work_type":"run_playbook","parameters":{},"hints":{ "zone" : [ 1 , 2.50 ] }},"x_custom_fields":{}}`,
		`{"protocol_version":"1.0","message_id":"550e8400-e29b-41d4-a716-446655440001","from_agent":"infra",
		  "to_agent":"orchestrator","timestamp":"2026-01-19T04:21:04Z","trace_id":"550e8400-e29b-41d4-a716-446655440002",
		  "request_id":"550e8400-e29b-41d4-a716-446655440003","type":"heartbeat","payload":{"agent_id":"infra-01",
		  "status":"idle","active_tasks":0,"max_concurrency":1,"active_task_ids":[]}}`,
		`{"protocol_version":"1.0","message_id":"550e8400-e29b-41d4-a716-446655440001","from_agent":"infra",
		  "to_agent":"orchestrator","timestamp":"2026-01-19T04:21:04Z","trace_id":"550e8400-e29b-41d4-a716-446655440002",
		  "request_id":"550e8400-e29b-41d4-a716-446655440003","type":"work_result","payload":{
		  "task_id":"550e8400-e29b-41d4-a716-446655440004","status":"failed","exit_code":2,
		  "output":"\u003ctag\u003e \ud83d\ude00 \ud800"}}`,
	}
	for i, in := range inputs {
		first, err := envelope.Decode([]byte(in))
		if err != nil {
			t.Fatalf("input %d: %v", i, err)
		}
		if i == 0 {
			p := first.Payload.(*envelope.WorkRequest)
			ts := time.Date(2026, 1, 19, 4, 21, 4, 500_000_000, time.UTC)
			if first.MessageID != msgID || p.TaskID != taskID || !first.Timestamp.Equal(ts) || first.Timestamp.Location() != time.UTC {
				t.Errorf("not normalized: %s", dump(first))
			}
			if string(p.Hints.Extra["zone"]) != `[1,2.50]` {
				t.Errorf("hints.zone = %s, want it compacted", p.Hints.Extra["zone"])
			}
		}
		if i == 2 {
			if out := first.Payload.(*envelope.WorkResult).Output; out != "<tag> 😀 \uFFFD" {
				t.Errorf("output = %q", out)
			}
		}
		b, err := envelope.Encode(first)
		if err != nil {
			t.Fatalf("input %d: Encode: %v", i, err)
		}
		second, err := envelope.Decode(b)
		if err != nil || !reflect.DeepEqual(first, second) {
			t.Fatalf("input %d: re-decode: %v\nfirst  %s\nsecond %s", i, err, dump(first), dump(second))
		}
		assertStableEncoding(t, b)
	}
}

// dump prints an envelope with its payload for failure messages.
func dump(e *envelope.Envelope) string {
	return fmt.Sprintf("%+v payload=%+v", *e, e.Payload)
}
