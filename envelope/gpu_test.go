package envelope_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
)

// TestGPUNeedReadsTheHint: a positive integer, decoded or set in memory, is
// the need; none is 0; anything else is a 5003 on the field.
func TestGPUNeedReadsTheHint(t *testing.T) {
	cases := []struct {
		name string
		x    map[string]any
		want int64
		bad  bool
	}{
		{"none", nil, 0, false},
		{"decoded", map[string]any{"gpu_vram_mb": json.Number("4096")}, 4096, false},
		{"in memory", map[string]any{"gpu_vram_mb": int64(512)}, 512, false},
		{"a whole float", map[string]any{"gpu_vram_mb": float64(2048)}, 2048, false},
		{"zero", map[string]any{"gpu_vram_mb": json.Number("0")}, 0, true},
		{"negative", map[string]any{"gpu_vram_mb": json.Number("-1")}, 0, true},
		{"a fraction", map[string]any{"gpu_vram_mb": json.Number("1.5")}, 0, true},
		{"a string", map[string]any{"gpu_vram_mb": "4096"}, 0, true},
		{"too large", map[string]any{"gpu_vram_mb": json.Number("1099511627777")}, 0, true},
	}
	for _, tc := range cases {
		got, err := envelope.GPUNeed(tc.x)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("%s: %d, %v; want %d, refused %v", tc.name, got, err, tc.want, tc.bad)
		}
		if err != nil && err.Context[errcodes.KeyFieldName] != "x_custom_fields.gpu_vram_mb" {
			t.Errorf("%s: the error names %v", tc.name, err.Context[errcodes.KeyFieldName])
		}
	}
}

// TestGPUUsesReadsTheResult: the list a work_result carries reads back after a
// trip through JSON; a malformed one is refused.
func TestGPUUsesReadsTheResult(t *testing.T) {
	want := []envelope.GPUUse{{Index: 1, UUID: "GPU-b", PeakMB: 4096}, {Index: 0, PeakMB: 0}}
	b, _ := json.Marshal(map[string]any{envelope.KeyGPUs: want})
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var x map[string]any
	if err := d.Decode(&x); err != nil {
		t.Fatal(err)
	}
	if got, err := envelope.GPUUses(x); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v, %v; want %+v", got, err, want)
	}
	if got, err := envelope.GPUUses(nil); got != nil || err != nil {
		t.Errorf("none: %+v, %v", got, err)
	}
	for _, bad := range []any{"gpu0", []any{"x"}, []any{map[string]any{"index": json.Number("-1"), "peak_vram_mb": json.Number("1")}},
		[]any{map[string]any{"index": json.Number("0"), "peak_vram_mb": json.Number("1"), "extra": true}},
		[]any{map[string]any{"index": json.Number("0"), "peak_vram_mb": json.Number("1"), "uuid": 7}}} {
		if _, err := envelope.GPUUses(map[string]any{envelope.KeyGPUs: bad}); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
