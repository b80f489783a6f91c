package envelope_test

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/jsonw/jsonwtest"
)

// encodeReference is what Encode did before it wrote JSON by hand: encoding/json on a
// copy whose timestamp is in UTC, HTML escaping off, no trailing newline. Encode must
// write the same bytes, or fail with the same error.
func encodeReference(e *envelope.Envelope) ([]byte, error) {
	c := *e
	c.Timestamp = c.Timestamp.UTC()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&c); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func assertEncodesLikeReference(t *testing.T, e *envelope.Envelope) {
	t.Helper()
	want, wantErr := encodeReference(e)
	got, err := envelope.Encode(e)
	if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("Encode error %v, encoding/json error %v\nenvelope %s", err, wantErr, dump(e))
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Encode differs from encoding/json\ngot  %q\nwant %q", got, want)
	}
}

// awkwardText joins up to maxPieces of jsonwtest.AwkwardPieces.
func awkwardText(g envGen, maxPieces int) string {
	var b strings.Builder
	for n := g.pick(maxPieces + 1); n > 0; n-- {
		b.WriteString(jsonwtest.AwkwardPieces[g.pick(len(jsonwtest.AwkwardPieces))])
	}
	return b.String()
}

// awkwardTime returns instants with and without fractions of a second (some with
// trailing zeros), in UTC and in other zones.
func awkwardTime(g envGen) time.Time {
	t := g.timestamp()
	switch g.pick(5) {
	case 0:
		t = t.Truncate(time.Second)
	case 1:
		t = t.Truncate(time.Millisecond)
	case 2:
		t = t.Truncate(10 * time.Microsecond)
	case 3:
		t = time.Date(int(g.between(0, 99)), time.Month(1+g.pick(12)), 1+g.pick(28), g.pick(24), 0, 0, g.pick(1e9), time.UTC)
	}
	zones := []*time.Location{time.UTC, time.FixedZone("CEST", 2*3600), time.FixedZone("", -(9*3600 + 30*60)), time.FixedZone("X", 14*3600)}
	return t.In(zones[g.pick(len(zones))])
}

func awkwardInt(g envGen) int64 {
	return []int64{0, 1, -1, 42, math.MaxInt64, math.MinInt64, int64(g.r.Uint64())}[g.pick(7)]
}

// awkwardObject returns a nil, empty or filled free-form object.
func awkwardObject(g envGen) map[string]any {
	switch g.pick(3) {
	case 0:
		return nil
	case 1:
		return map[string]any{}
	}
	m := map[string]any{awkwardText(g, 3): awkwardText(g, 3), "n": json.Number("1.50")}
	for n := g.pick(3); n > 0; n-- {
		m[awkwardText(g, 3)] = g.value(2)
	}
	return m
}

func awkwardHints(g envGen) *envelope.Hints {
	if g.pick(4) == 0 {
		return nil
	}
	h := &envelope.Hints{}
	if g.chance() {
		h.MaxDurationSeconds = awkwardInt(g)
	}
	if g.chance() {
		h.MaxMemoryMB = awkwardInt(g)
	}
	if g.chance() {
		h.AgentID = awkwardText(g, 3)
	}
	extra := []string{"agent_id", "max_duration_seconds", "max_memory_mb", "a", "max", "zone", "<x>", "é", "\u2028", ""}
	raws := []string{"null", `{ "b" : [ 1 , 2.50 ] , "a" : "<&>" }`, `"\u2028 \u003c"`, "true", "-0", "\"\u2028\"", "[ ]"}
	for n := g.pick(4); n > 0; n-- {
		if h.Extra == nil {
			h.Extra = map[string]json.RawMessage{}
		}
		var raw json.RawMessage // a nil RawMessage writes null
		if i := g.pick(len(raws) + 1); i < len(raws) {
			raw = json.RawMessage(raws[i])
		}
		h.Extra[extra[g.pick(len(extra))]] = raw
	}
	return h
}

// roughen replaces what Encode writes by hand with awkward values: header strings,
// timestamp, the strings, numbers and optional members of the three hot payloads, and
// x_custom_fields.
func roughen(g envGen, e *envelope.Envelope) {
	for _, s := range []*string{&e.ProtocolVersion, &e.MessageID, &e.TraceID, &e.RequestID} {
		if g.chance() {
			*s = awkwardText(g, 6)
		}
	}
	if g.chance() {
		e.FromAgent, e.ToAgent = envelope.AgentType(awkwardText(g, 3)), envelope.AgentType(awkwardText(g, 3))
	}
	e.Timestamp = awkwardTime(g)
	e.XCustomFields = awkwardObject(g)
	switch p := e.Payload.(type) {
	case *envelope.WorkRequest:
		p.TaskID, p.WorkType = awkwardText(g, 4), awkwardText(g, 4)
		p.Parameters, p.Hints = awkwardObject(g), awkwardHints(g)
	case *envelope.WorkStatus:
		p.TaskID, p.Status, p.ProgressPercent = awkwardText(g, 4), awkwardText(g, 2), int(awkwardInt(g))
		p.Step = envelope.Step{Number: awkwardInt(g), Name: awkwardText(g, 4), Output: awkwardText(g, 40)}
		if g.chance() {
			p.Step.OutputChunk = awkwardText(g, 3)
		}
	case *envelope.WorkResult:
		p.TaskID, p.Status, p.ExitCode, p.Output = awkwardText(g, 4), awkwardText(g, 2), awkwardInt(g), awkwardText(g, 40)
		if g.chance() {
			p.ResourcesUsed = &envelope.ResourcesUsed{DurationSeconds: awkwardInt(g), GPUVRAMMB: awkwardInt(g), CPUTimeMS: awkwardInt(g)}
		}
	}
}

func TestEncodeMatchesEncodingJSONForEveryType(t *testing.T) {
	g := envGen{rand.New(rand.NewPCG(2028, 2029))}
	const perType = 400
	for _, typ := range allTypes {
		t.Run(string(typ), func(t *testing.T) {
			for range perType {
				e := g.envelope(typ)
				assertEncodesLikeReference(t, e) // as generated: valid and in decoded form
				roughen(g, e)
				assertEncodesLikeReference(t, e)
			}
		})
	}
}

// TestEncodeMatchesEncodingJSONOnEveryAwkwardString puts each text of the corpus in
// every string Encode writes by hand.
func TestEncodeMatchesEncodingJSONOnEveryAwkwardString(t *testing.T) {
	for _, s := range jsonwtest.AwkwardTexts() {
		assertStringEncodesLikeReference(t, s)
	}
}

// FuzzEncodeMatchesEncodingJSON checks that any text, in every place Encode writes
// strings by hand, comes out as encoding/json writes it.
func FuzzEncodeMatchesEncodingJSON(f *testing.F) {
	for _, p := range jsonwtest.AwkwardPieces {
		f.Add("0123456789" + p + "abc")
	}
	f.Fuzz(assertStringEncodesLikeReference)
}

// assertStringEncodesLikeReference puts s in every string Encode writes by hand.
func assertStringEncodesLikeReference(t *testing.T, s string) {
	t.Helper()
	status := envelope.New(envelope.Infra, envelope.Orchestrator, s, s, &envelope.WorkStatus{
		TaskID: s, Status: s, Step: envelope.Step{Name: s, Output: s, OutputChunk: s}})
	status.MessageID, status.ProtocolVersion = s, s
	status.FromAgent, status.ToAgent = envelope.AgentType(s), envelope.AgentType(s)
	assertEncodesLikeReference(t, status)
	result := envelope.New(envelope.Infra, envelope.Orchestrator, "", "", &envelope.WorkResult{TaskID: s, Status: s, Output: s})
	assertEncodesLikeReference(t, result)
	request := envelope.New(envelope.Orchestrator, envelope.Infra, "", "", &envelope.WorkRequest{TaskID: s, WorkType: s,
		Parameters: map[string]any{s: s}, Hints: &envelope.Hints{AgentID: s, Extra: map[string]json.RawMessage{s: json.RawMessage(`"x"`)}}})
	assertEncodesLikeReference(t, request)
}

// foreignPayload is a payload type Encode does not know.
type foreignPayload struct {
	Text string `json:"text"`
}

func (foreignPayload) MessageType() envelope.Type { return "foreign" }

func TestEncodeFallsBackToEncodingJSON(t *testing.T) {
	// Each envelope needs encoding/json somewhere: it either writes what the fast path
	// does not, or reports an error, which Encode must report in the same words.
	withTime := func(ts time.Time) *envelope.Envelope {
		e := envelope.New(envelope.Infra, envelope.Orchestrator, "", "", &envelope.Ping{})
		e.Timestamp = ts
		return e
	}
	withParameters := func(p map[string]any) *envelope.Envelope {
		return envelope.New(envelope.Orchestrator, envelope.Infra, "", "", &envelope.WorkRequest{TaskID: taskID, WorkType: "w", Parameters: p})
	}
	withHint := func(raw string) *envelope.Envelope {
		return envelope.New(envelope.Orchestrator, envelope.Infra, "", "", &envelope.WorkRequest{TaskID: taskID, WorkType: "w",
			Hints: &envelope.Hints{Extra: map[string]json.RawMessage{"zone": json.RawMessage(raw)}}})
	}
	var nilRequest *envelope.WorkRequest
	cases := map[string]*envelope.Envelope{
		"year 10000":              withTime(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)),
		"year -1":                 withTime(time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC)),
		"year 10000 once in UTC":  withTime(time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("", -2*3600))),
		"year -1 once in UTC":     withTime(time.Date(0, 1, 1, 1, 0, 0, 0, time.FixedZone("", 2*3600))),
		"last instant of 9999":    withTime(time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)),
		"first instant of year 0": withTime(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)),
		"zero time":               withTime(time.Time{}),
		"monotonic clock reading": withTime(time.Now()),
		"unsupported parameter":   withParameters(map[string]any{"c": make(chan int)}),
		"NaN parameter":           withParameters(map[string]any{"x": math.NaN()}),
		"invalid number":          withParameters(map[string]any{"n": json.Number("1e")}),
		"invalid raw hint":        withHint(`{"a":`),
		"empty raw hint":          withHint(``),
		"raw hint with spaces":    withHint(" [ 1 ,\n\t2 ] "),
		"nil work_request":        envelope.New(envelope.Orchestrator, envelope.Infra, "", "", nilRequest),
		"foreign payload":         envelope.New(envelope.Orchestrator, envelope.Infra, "", "", foreignPayload{Text: "<\u2028>"}),
		"error payload":           envelope.New(envelope.Infra, envelope.Orchestrator, "", "", &envelope.ErrorPayload{ErrorCode: 5003, ErrorMessage: "<&>"}),
	}
	for name, ts := range map[string]time.Time{"unsupported custom field": time.Now(), "custom field and year 10000": time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		e := withTime(ts)
		e.XCustomFields = map[string]any{"f": func() {}}
		cases[name] = e
	}
	for name, e := range cases {
		t.Run(name, func(t *testing.T) { assertEncodesLikeReference(t, e) })
	}
}

func TestEncodeAllocatesOnlyItsOutputForHotPayloads(t *testing.T) {
	// With no free-form values, Encode must not fall back to encoding/json, and its
	// size estimate must be large enough that the buffer never grows.
	out := strings.Repeat(logLine, 300)
	for _, p := range []envelope.Payload{
		&envelope.WorkStatus{TaskID: taskID, Status: envelope.StatusRunning, Step: envelope.Step{Number: 1, Name: "n", Output: out}},
		&envelope.WorkResult{TaskID: taskID, Status: envelope.ResultFailed, ExitCode: math.MinInt64, Output: out,
			ResourcesUsed: &envelope.ResourcesUsed{DurationSeconds: math.MinInt64, GPUVRAMMB: math.MinInt64, CPUTimeMS: math.MinInt64}},
		&envelope.WorkRequest{TaskID: taskID, WorkType: "run", Hints: &envelope.Hints{MaxDurationSeconds: math.MinInt64, MaxMemoryMB: 1, AgentID: "a"}},
	} {
		e := envelope.New(envelope.Orchestrator, envelope.Infra, "", "", p)
		if n := testing.AllocsPerRun(20, func() { _, _ = envelope.Encode(e) }); n != 1 {
			t.Errorf("%s: %v allocations per Encode, want 1", p.MessageType(), n)
		}
	}
}
