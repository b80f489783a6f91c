package badgercache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent/dedupe"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/jsonw/jsonwtest"
)

// assertEntryLikeReference checks encodeEntry against encoding/json with HTML escaping
// off: the same bytes, or the same error; the hand-written path gives up only when
// encoding/json fails; both outputs decode alike, as Get reads them. It reports
// whether the hand-written path wrote e.
func assertEntryLikeReference(t *testing.T, e *dedupe.Entry) bool {
	t.Helper()
	want, wantErr := jsonwtest.Reference(e)
	got, err := encodeEntry(e)
	if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("encodeEntry error %v, encoding/json error %v", err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encodeEntry differs from encoding/json\ngot  %s\nwant %s", got, want)
	}
	w := entryWriter{}
	w.entry(e)
	if w.Failed != (wantErr != nil) {
		t.Fatalf("hand-written path failed=%v, encoding/json error %v", w.Failed, wantErr)
	}
	if err != nil {
		return false
	}
	if err := jsonwtest.SameDecoded(got, want); err != nil {
		t.Fatal(err)
	}
	var a, b dedupe.Entry
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("decode %s: %v", got, err)
	}
	if err := json.Unmarshal(want, &b); err != nil {
		t.Fatalf("decode %s: %v", want, err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("decoded entries differ\n%+v\n%+v", a, b)
	}
	return true
}

func TestCacheEntryMatchesEncodingJSON(t *testing.T) {
	// Every field of dedupe.Entry and of what it holds is filled by reflection, so a
	// field added to them and missed by entryjson.go fails here.
	g := jsonwtest.New(7, 11)
	const n = 5000
	hand := 0
	for range n {
		e := new(dedupe.Entry)
		g.Fill(e)
		if assertEntryLikeReference(t, e) {
			hand++
		}
	}
	jsonwtest.MostByHand(t, hand, n)
}

func TestCacheEntryFallsBackToEncodingJSON(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	cases := map[string]*dedupe.Entry{
		"year 10000":              {StartedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"zone offset of 24 hours": {StartedAt: at.In(time.FixedZone("", -24*3600))},
		"NaN result field":        {StartedAt: at, ResultFields: map[string]any{"x": math.NaN()}},
		"unsupported field":       {StartedAt: at, ResultFields: map[string]any{"f": func() {}}},
	}
	for name, e := range cases {
		t.Run(name, func(t *testing.T) {
			if assertEntryLikeReference(t, e) {
				t.Error("written by hand")
			}
		})
	}
}

func TestCacheEntryKeepsHTMLAsWritten(t *testing.T) {
	e := &dedupe.Entry{State: dedupe.Finished, StartedAt: time.Unix(0, 0).UTC(), Result: &envelope.WorkResult{Output: "<b>&</b>"}}
	b, err := encodeEntry(e)
	if err != nil || !bytes.Contains(b, []byte(`"output":"<b>&</b>"`)) {
		t.Fatalf("got %s, %v", b, err)
	}
	// An entry written before, by json.Marshal with its \u003c escapes, reads the same.
	old, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var a, c dedupe.Entry
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(old, &c); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, c) {
		t.Fatalf("old and new entries decode differently\n%+v\n%+v", a, c)
	}
}

func TestCacheEntryAllocatesOnlyItsOutput(t *testing.T) {
	// Without result fields an entry must not fall back to encoding/json, and the size
	// estimate must be large enough that the buffer never grows.
	entries := map[string]*dedupe.Entry{"running": benchEntry()}
	for _, text := range []string{"", strings.Repeat("a line of \"output\"\twith <tags> & é\n", 40)} {
		entries[fmt.Sprint("widest with text of ", len(text))] = &dedupe.Entry{
			State: text, TaskID: text, WorkType: text, OutputLen: math.MinInt64, OutputPieces: math.MinInt,
			StartedAt: time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.FixedZone("", -(9*3600+30*60))),
			Result: &envelope.WorkResult{TaskID: text, Status: text, ExitCode: math.MinInt64, Output: text,
				ResourcesUsed: &envelope.ResourcesUsed{DurationSeconds: math.MinInt64, GPUVRAMMB: math.MinInt64, CPUTimeMS: math.MinInt64}}}
	}
	for name, e := range entries {
		if n := testing.AllocsPerRun(20, func() { _, _ = encodeEntry(e) }); n != 1 {
			t.Errorf("%s: %v allocations per encodeEntry, want 1", name, n)
		}
	}
}

// BenchmarkCacheEntry encodes a running and a finished dedupe cache entry, as every
// work_request writes them.
func BenchmarkCacheEntry(b *testing.B) {
	c := &Cache{ttl: time.Hour}
	running := benchEntry()
	finished := benchEntry()
	finished.State, finished.OutputLen, finished.OutputPieces = dedupe.Finished, 60, 1
	finished.Result = &envelope.WorkResult{TaskID: finished.TaskID, Status: envelope.ResultSuccess, Output: strings.Repeat("output line\n", 5),
		ResourcesUsed: &envelope.ResourcesUsed{DurationSeconds: 1, CPUTimeMS: 12}}
	for name, e := range map[string]*dedupe.Entry{"running": running, "finished": finished} {
		b.Run(name, func(b *testing.B) {
			id := envelope.NewID()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.entry(id, e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
