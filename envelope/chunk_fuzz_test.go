package envelope_test

import (
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
)

// FuzzParseChunkRange checks the parser of step.output_chunk, which comes off the
// network: it never panics, whatever it accepts satisfies 0 <= A < B <= N with
// B - A <= MaxChunkSize, and it prints back to the same text.
func FuzzParseChunkRange(f *testing.F) {
	for _, s := range []string{"bytes 0-262144 of 1000000", "bytes 5-6 of 6", "bytes 0-0 of 0",
		"bytes 01-2 of 3", "bytes -1-2 of 3", "bytes 1-2 of 99999999999999999999", "bytes 1-2of 3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := envelope.ParseChunkRange(s)
		if err != nil {
			return
		}
		if r.Start < 0 || r.Start >= r.End || r.End > r.Total || r.Len() > envelope.MaxChunkSize {
			t.Fatalf("%q accepted as %+v", s, r)
		}
		if r.String() != s {
			t.Fatalf("%q accepted but prints as %q", s, r.String())
		}
	})
}
