package jsonw_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/chiffon-dev/chiffon/internal/jsonw"
	"github.com/chiffon-dev/chiffon/internal/jsonw/jsonwtest"
)

func TestAppendValueMatchesEncodingJSON(t *testing.T) {
	cases := map[string]any{
		"nil":              nil,
		"html":             map[string]any{"<k>": "a & b <c>", "u": "\u2028"},
		"number":           map[string]any{"n": json.Number("1.50"), "f": 1.5, "i": int64(math.MinInt64)},
		"nested":           map[string]any{"a": []any{map[string]any{"b": nil}, "x", true}},
		"raw":              json.RawMessage(` { "a" : [ 1 , "<&>" ] } `),
		"empty map":        map[string]any{},
		"NaN":              math.NaN(),
		"unsupported type": map[string]any{"c": make(chan int)},
		"invalid number":   json.Number("1e"),
		"invalid raw":      json.RawMessage(`{"a":`),
	}
	g := jsonwtest.New(3, 4)
	for i := range 2000 {
		cases[fmt.Sprint("generated ", i)] = g.Any()
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			want, wantErr := jsonwtest.Reference(v)
			got, err := jsonw.AppendValue([]byte(prefix), v)
			if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Fatalf("error %v, encoding/json error %v", err, wantErr)
			}
			if err != nil {
				if string(got) != prefix {
					t.Fatalf("failed but changed dst to %q", got)
				}
				return
			}
			if !bytes.Equal(got, append([]byte(prefix), want...)) {
				t.Fatalf("got  %s\nwant %s", got[len(prefix):], want)
			}
		})
	}
}

func TestAppendValueWorksAfterAnError(t *testing.T) {
	// The encoders are pooled: one that failed must serve the next value as new.
	for range 10 {
		if _, err := jsonw.AppendValue(nil, math.Inf(1)); err == nil {
			t.Fatal("no error for +Inf")
		}
		if got, err := jsonw.AppendValue(nil, "ok"); err != nil || string(got) != `"ok"` {
			t.Fatalf("after an error: %q, %v", got, err)
		}
	}
}
