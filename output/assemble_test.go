package output_test

import (
	"runtime"
	"slices"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/output"
)

// placeAt is a work_status of step whose output goes at off (chunk: its range).
func placeAt(a *output.Assembler, step int64, data, chunk string, off int64) (output.Placed, bool, error) {
	st := &envelope.WorkStatus{Step: envelope.Step{Number: step, Output: data, OutputChunk: chunk}}
	return a.Place(map[string]any{output.KeyOffset: off}, st)
}

// TestAssemblerKeepsOnlyNewBytesBelowItsLimit: a piece is cut at the Limit on a
// rune boundary, and only the bytes it adds to those held are new, at most four
// ranges of them.
func TestAssemblerKeepsOnlyNewBytesBelowItsLimit(t *testing.T) {
	type piece struct {
		data string
		off  int64
	}
	tests := []struct {
		name   string
		held   []piece // placed first
		p      piece
		data   string
		newSps []output.Span
		cut    bool
	}{
		{"below the limit", nil, piece{"abcd", 0}, "abcd", []output.Span{{0, 4}}, false},
		{"up to the limit", nil, piece{"abcdefghijklmnop", 0}, "abcdefghijklmnop", []output.Span{{0, 16}}, false},
		{"one byte over", nil, piece{"abcdefghijklmnopq", 0}, "abcdefghijklmnop", []output.Span{{0, 16}}, true},
		{"rune across the limit", nil, piece{"abcdefghijklmno€", 0}, "abcdefghijklmno", []output.Span{{0, 15}}, true},
		{"wholly past it", nil, piece{"xyz", 16}, "", nil, true},
		{"a repeat", []piece{{"abcd", 0}}, piece{"abcd", 0}, "abcd", nil, false},
		{"an overlap", []piece{{"abcd", 0}}, piece{"cdef", 2}, "cdef", []output.Span{{4, 6}}, false},
		{"gaps between held bytes", []piece{{"b", 1}, {"d", 3}}, piece{"abcde", 0}, "abcde",
			[]output.Span{{0, 1}, {2, 3}, {4, 5}}, false},
		{"more than four gaps", []piece{{"b", 1}, {"d", 3}, {"f", 5}, {"h", 7}, {"j", 9}}, piece{"abcdefghijk", 0},
			"abcdefghijk", []output.Span{{0, 1}, {2, 3}, {4, 5}, {6, 7}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := output.Assembler{Limit: 16}
			for _, h := range tt.held {
				if _, _, err := placeAt(&a, 1, h.data, "", h.off); err != nil {
					t.Fatal(err)
				}
			}
			p, ok, err := placeAt(&a, 1, tt.p.data, "", tt.p.off)
			if err != nil || ok != (tt.data != "") || p.Data != tt.data || p.Cut != tt.cut || !slices.Equal(p.New, tt.newSps) {
				t.Fatalf("placed %+v, ok %v, err %v; want data %q, new %v, cut %v", p, ok, err, tt.data, tt.newSps, tt.cut)
			}
		})
	}
}

// TestAssemblerAllocatesNothingForAClaimedTotal: a chunk announcing a petabyte
// costs what the chunk holds, not what it claims, whatever the step.
func TestAssemblerAllocatesNothingForAClaimedTotal(t *testing.T) {
	a := output.Assembler{Limit: 1 << 10}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for step := range int64(64) {
		if _, _, err := placeAt(&a, step, "xyz", "bytes 0-3 of 1125899906842624", 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("64 chunks of 3 bytes allocated %d bytes", n)
	}
}
