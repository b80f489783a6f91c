package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/jsonw/jsonwtest"
)

// assertStoredLikeReference checks MarshalStored against what it wrote before records
// were written by hand: encoding/json with HTML escaping off. The bytes, or the error,
// must be the same; the hand-written path must write every record (a non-nil *Task,
// *Event or StoredEvent) except those encoding/json fails on; and both outputs must
// decode alike. It reports whether the hand-written path wrote v.
func assertStoredLikeReference(t *testing.T, v any) bool {
	t.Helper()
	want, wantErr := jsonwtest.Reference(v)
	got, err := MarshalStored(v)
	if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("MarshalStored error %v, encoding/json error %v\nvalue %s", err, wantErr, dumpValue(v))
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("MarshalStored differs from encoding/json\ngot  %s\nwant %s", got, want)
	}
	_, hand := encodeStored(v)
	if hand != (isRecord(v) && wantErr == nil) {
		t.Fatalf("hand-written path ok=%v, encoding/json error %v\nvalue %s", hand, wantErr, dumpValue(v))
	}
	if err == nil {
		if err := jsonwtest.SameDecoded(got, want); err != nil {
			t.Fatal(err)
		}
		assertDecodesAlike(t, v, got, want)
	}
	return hand
}

func isRecord(v any) bool {
	switch v := v.(type) {
	case *Task:
		return v != nil
	case *Event:
		return v != nil
	case StoredEvent:
		return v.Event != nil
	}
	return false
}

// assertDecodesAlike decodes got and want into the type of v, as the store reads
// them back.
func assertDecodesAlike(t *testing.T, v any, got, want []byte) {
	t.Helper()
	fresh := func() any {
		switch v.(type) {
		case StoredEvent:
			return &StoredEvent{Event: &Event{}}
		}
		return reflect.New(reflect.TypeOf(v).Elem()).Interface()
	}
	a, b := fresh(), fresh()
	if err := json.Unmarshal(got, a); err != nil {
		t.Fatalf("decode %s: %v", got, err)
	}
	if err := json.Unmarshal(want, b); err != nil {
		t.Fatalf("decode %s: %v", want, err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("decoded values differ\n%s\n%s", dumpValue(a), dumpValue(b))
	}
}

func dumpValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func TestMarshalStoredMatchesEncodingJSON(t *testing.T) {
	// Every field of every stored type is filled by reflection, so a field added to
	// Task, Event or the types they hold and missed by storedjson.go fails here.
	g := jsonwtest.New(2028, 2029)
	kinds := []struct {
		name string
		gen  func() any
	}{
		{"task", func() any { v := new(Task); g.Fill(v); return v }},
		{"event", func() any { v := new(Event); g.Fill(v); return v }},
		{"stored event", func() any {
			var v StoredEvent
			g.Fill(&v)
			return v
		}},
		{"stored form of a status event", func() any {
			v := new(Event)
			g.Fill(v)
			if v.Status == nil {
				v.Status = &envelope.WorkStatus{}
			}
			v.Status.Step.Output = g.Text() + "x"
			if v.OutputOffset == nil {
				v.OutputOffset = new(int64)
			}
			return StoredForm(v)
		}},
	}
	const n = 3000
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			hand := 0
			for range n {
				if assertStoredLikeReference(t, kind.gen()) {
					hand++
				}
			}
			jsonwtest.MostByHand(t, hand, n)
		})
	}
}

func TestMarshalStoredFallsBackToEncodingJSON(t *testing.T) {
	// Each value needs encoding/json somewhere: it either writes what the hand-written
	// path does not, or reports an error, which MarshalStored must report in the same
	// words.
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	record := func(change func(*Task)) *Task {
		t := &Task{ID: "t", State: StateRunning, CreatedAt: at, UpdatedAt: at}
		change(t)
		return t
	}
	var nilTask *Task
	var nilEvent *Event
	cases := map[string]any{
		"year 10000": record(func(t *Task) { t.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }),
		"year -1 in its own zone": record(func(t *Task) {
			t.UpdatedAt = time.Date(0, 1, 1, 1, 0, 0, 0, time.UTC).In(time.FixedZone("", -2*3600))
		}),
		"zone offset of 24 hours":  record(func(t *Task) { t.Steps = []StepInfo{{UpdatedAt: at.In(time.FixedZone("", 24*3600))}} }),
		"NaN parameter":            record(func(t *Task) { t.Parameters = map[string]any{"x": math.NaN()} }),
		"invalid number parameter": record(func(t *Task) { t.Parameters = map[string]any{"n": json.Number("1e")} }),
		"unsupported context":      &Event{Type: EventError, At: at, Error: &TaskError{Context: map[string]any{"c": make(chan int)}}},
		"cyclic parameters":        record(func(t *Task) { m := map[string]any{}; m["self"] = m; t.Parameters = m }),
		"invalid structured output": record(func(t *Task) {
			t.Result = &Result{Status: envelope.ResultSuccess, StructuredOutput: json.RawMessage(`{"a":`), At: at}
		}),
		"invalid structured output of an event": &Event{Type: EventResult, At: at, StructuredOutput: json.RawMessage(`[1,`)},
		"nil task":                              nilTask,
		"nil event":                             nilEvent,
		"stored event without one":              StoredEvent{OutputLen: 3},
		"a map":                                 map[string]any{"<": "&"},
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			if assertStoredLikeReference(t, v) {
				t.Error("written by hand")
			}
		})
	}
}

func TestMarshalStoredAllocatesOnlyItsOutput(t *testing.T) {
	// Without free-form values a record must not fall back to encoding/json, and the
	// size estimate must be large enough that the buffer never grows: numbers at their
	// widest, times with nanoseconds and an offset, text with escapes.
	records := map[string]any{}
	for _, text := range []string{"", strings.Repeat("a line of \"output\"\twith <tags> & é\n", 40)} {
		record, event := widestRecords(text)
		size := fmt.Sprint(len(text))
		records["task with text of "+size] = record
		records["event with text of "+size] = event
		records["stored event with text of "+size] = StoredForm(event)
	}
	for name, v := range benchRecords() {
		if name != "task" { // its parameters go through encoding/json
			records["bench "+name] = v
		}
	}
	for name, v := range records {
		if _, ok := encodeStored(v); !ok {
			t.Fatalf("%s: not written by hand", name)
		}
		if n := testing.AllocsPerRun(20, func() { _, _ = MarshalStored(v) }); n != 1 {
			t.Errorf("%s: %v allocations per MarshalStored, want 1", name, n)
		}
	}
}

// widestRecords are a task and an event with every member set, numbers at their
// widest, times with nanoseconds and an offset, and text for every string.
func widestRecords(text string) (*Task, *Event) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.FixedZone("", -(9*3600+30*60)))
	off, gpu := int64(math.MinInt64), int64(math.MinInt64)
	rec := &Task{ID: text, State: StateError, ToAgent: "infra", WorkType: text, AgentID: text, RequestID: text, TraceID: text,
		BatchID: text, Schedule: text, FireTime: &at,
		Approval: &Approval{State: text, Why: text, RequestedAt: at, ExpiresAt: at, By: text, Note: text, DecidedAt: &at},
		Hints:    &Hints{MaxDurationSeconds: math.MinInt64, MaxMemoryMB: math.MinInt64, AgentID: text, GPUVRAMMB: &gpu},
		Attempts: math.MinInt, ProgressPercent: math.MinInt, OutputBytes: math.MinInt64, OutputComplete: true, CancelRequested: true,
		Retries: []Retry{{Attempt: math.MinInt, Code: math.MinInt, Message: text, AgentID: text, WaitMS: math.MinInt64, At: at},
			{Attempt: math.MinInt, Code: math.MinInt, Message: text, AgentID: text, WaitMS: math.MinInt64, At: at}},
		Steps: []StepInfo{{Number: math.MinInt64, Name: text, Status: text, UpdatedAt: at}, {Number: math.MinInt64, Name: text, Status: text, UpdatedAt: at}},
		Result: &Result{Status: text, ExitCode: math.MinInt64, OutputTruncated: true, OutputTotalBytes: math.MinInt64, At: at,
			GPUs:          []GPUUse{{Index: math.MinInt, UUID: text, Name: text, PeakMB: math.MinInt64}, {Index: math.MinInt, UUID: text, Name: text, PeakMB: math.MinInt64}},
			ResourcesUsed: &envelope.ResourcesUsed{DurationSeconds: math.MinInt64, GPUVRAMMB: math.MinInt64, CPUTimeMS: math.MinInt64}},
		Error:     &TaskError{Code: math.MinInt, Message: text},
		CreatedAt: at, UpdatedAt: at, FirstDispatchAt: &at, LastAttemptAt: &at, FinishedAt: &at,
	}
	event := &Event{Seq: math.MinInt64, Type: text, At: at, State: StateError, OutputOffset: &off, Message: text, By: text,
		Status: &envelope.WorkStatus{TaskID: text, Status: text, ProgressPercent: math.MinInt,
			Step: envelope.Step{Number: math.MinInt64, Name: text, Output: text, OutputChunk: text}},
		Result: &envelope.WorkResult{TaskID: text, Status: text, ExitCode: math.MinInt64, Output: text,
			ResourcesUsed: &envelope.ResourcesUsed{DurationSeconds: math.MinInt64, GPUVRAMMB: math.MinInt64, CPUTimeMS: math.MinInt64}},
		Error: &TaskError{Code: math.MinInt, Message: text}}
	return rec, event
}

// benchRecords are a task's record and events as the orchestrator stores them for a
// task like the benchmark's: a small parameter, one step, a result.
func benchRecords() map[string]any {
	now := time.Date(2025, 6, 1, 12, 30, 45, 123456789, time.UTC)
	later := now.Add(1500 * time.Millisecond)
	off := int64(0)
	rec := &Task{
		ID: envelope.NewID(), State: StateSucceeded, ToAgent: envelope.Infra, WorkType: "noop",
		Parameters: map[string]any{"data": strings.Repeat("x", 64)},
		AgentID:    "infra-" + envelope.NewID(), RequestID: envelope.NewID(), TraceID: envelope.NewID(),
		Attempts: 1, ProgressPercent: 100,
		Steps:       []StepInfo{{Number: 1, Name: "run", Status: envelope.StatusStepCompleted, UpdatedAt: later}},
		Result:      &Result{Status: envelope.ResultSuccess, ResourcesUsed: &envelope.ResourcesUsed{DurationSeconds: 1, CPUTimeMS: 12}, OutputTotalBytes: 64, At: later},
		OutputBytes: 64, OutputComplete: true, CreatedAt: now, UpdatedAt: later,
		FirstDispatchAt: &now, LastAttemptAt: &now, FinishedAt: &later,
	}
	bare := *rec
	bare.Parameters = nil
	status := &Event{Seq: 3, Type: EventStatus, At: later, State: StateRunning, OutputOffset: &off,
		Status: &envelope.WorkStatus{TaskID: rec.ID, Status: envelope.StatusStepCompleted, ProgressPercent: 100,
			Step: envelope.Step{Number: 1, Name: "run", Output: strings.Repeat("output line\n", 5)}}}
	return map[string]any{
		"task":                    rec,
		"task_without_parameters": &bare,
		"event_state":             &Event{Seq: 2, Type: EventState, At: now, State: StateDispatched, Message: "dispatched to infra-1 (attempt 1)"},
		"event_status":            StoredForm(status),
		"event_result": &Event{Seq: 4, Type: EventResult, At: later, State: StateSucceeded,
			Result: &envelope.WorkResult{TaskID: rec.ID, Status: envelope.ResultSuccess, Output: strings.Repeat("output line\n", 5),
				ResourcesUsed: &envelope.ResourcesUsed{DurationSeconds: 1, CPUTimeMS: 12}}},
	}
}

// BenchmarkMarshalStored encodes a task's record and its events, as every save does.
func BenchmarkMarshalStored(b *testing.B) {
	records := benchRecords()
	for _, name := range []string{"task", "task_without_parameters", "event_state", "event_status", "event_result"} {
		v := records[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := MarshalStored(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
