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

// TestMachineGPUsReadTheList: the GPUs a registration or heartbeat lists read
// back after a trip through JSON (PutGPUs, then a decode); a malformed list is
// a 5003 on x_custom_fields.gpus; no list is none.
func TestMachineGPUsReadTheList(t *testing.T) {
	want := []envelope.GPU{{Index: 0, UUID: "GPU-a", Name: "NVIDIA H100", TotalMB: 81559, FreeMB: 80000},
		{Index: 1, Name: "NVIDIA T4", TotalMB: 15360}}
	if x := envelope.PutGPUs(nil, nil); x != nil {
		t.Errorf("PutGPUs of no GPU made %v", x)
	}
	b, _ := json.Marshal(envelope.PutGPUs(map[string]any{"other": 1}, want))
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var x map[string]any
	if err := d.Decode(&x); err != nil {
		t.Fatal(err)
	}
	if got, err := envelope.MachineGPUs(x); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v, %v; want %+v", got, err, want)
	}
	if got, err := envelope.MachineGPUs(nil); got != nil || err != nil {
		t.Errorf("none: %+v, %v", got, err)
	}
	gpu := func(edit func(m map[string]any)) []any {
		m := map[string]any{"index": json.Number("0"), "name": "a", "total_mb": json.Number("1"), "free_mb": json.Number("1")}
		edit(m)
		return []any{m}
	}
	for name, bad := range map[string]any{
		"not a list":        map[string]any{},
		"not an object":     []any{"H100"},
		"no name":           gpu(func(m map[string]any) { delete(m, "name") }),
		"negative free":     gpu(func(m map[string]any) { m["free_mb"] = json.Number("-1") }),
		"index too large":   gpu(func(m map[string]any) { m["index"] = json.Number("65536") }),
		"uuid not a string": gpu(func(m map[string]any) { m["uuid"] = json.Number("7") }),
		"unknown field":     gpu(func(m map[string]any) { m["temp"] = json.Number("40") }),
		"65 GPUs":           make([]any, 65),
	} {
		_, err := envelope.MachineGPUs(map[string]any{envelope.KeyGPUs: bad})
		if err == nil || err.Context[errcodes.KeyFieldName] != "x_custom_fields.gpus" {
			t.Errorf("%s: %v, want a 5003 on x_custom_fields.gpus", name, err)
		}
	}
}
