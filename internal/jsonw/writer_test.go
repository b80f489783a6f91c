package jsonw_test

import (
	"math"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/internal/jsonw"
)

func TestWriterWritesWhatEncodingJSONWrites(t *testing.T) {
	var w jsonw.Writer
	w.Raw(`{"s":`)
	w.String("<a>\n")
	w.Raw(`,"i":`)
	w.Int(math.MinInt64)
	w.Raw(`,"b":`)
	w.Bool(true)
	w.Raw(`,"t":`)
	w.Time(time.Date(2025, 6, 1, 12, 0, 0, 5, time.FixedZone("", 3600)))
	w.Raw(`,"v":`)
	w.Value(map[string]any{"&": []any{1.5, nil}})
	w.Raw("}")
	want := `{"s":"<a>\n","i":-9223372036854775808,"b":true,"t":"2025-06-01T12:00:00.000000005+01:00","v":{"&":[1.5,null]}}`
	if w.Failed || string(w.Buf) != want {
		t.Fatalf("got %s (failed %v)\nwant %s", w.Buf, w.Failed, want)
	}
}

func TestWriterFailsOnWhatItCannotWrite(t *testing.T) {
	for name, write := range map[string]func(*jsonw.Writer){
		"year 10000":   func(w *jsonw.Writer) { w.Time(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)) },
		"offset 24h":   func(w *jsonw.Writer) { w.Time(time.Date(2000, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))) },
		"NaN value":    func(w *jsonw.Writer) { w.Value(math.NaN()) },
		"channel":      func(w *jsonw.Writer) { w.Value(make(chan int)) },
		"then success": func(w *jsonw.Writer) { w.Value(math.Inf(-1)); w.String("ok") }, // Failed stays set
	} {
		w := jsonw.Writer{}
		write(&w)
		if !w.Failed {
			t.Errorf("%s: Failed not set", name)
		}
	}
}
