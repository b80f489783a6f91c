package envelope_test

import (
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
)

func TestParseChunkRangeRoundTrip(t *testing.T) {
	for _, s := range []string{
		"bytes 0-1 of 1",
		"bytes 0-262144 of 524288",
		"bytes 262144-524288 of 524288",
		"bytes 524286-524290 of 1048576",
		"bytes 1125899906580480-1125899906842624 of 1125899906842624",
	} {
		r, err := envelope.ParseChunkRange(s)
		if err != nil {
			t.Errorf("ParseChunkRange(%q): %v", s, err)
			continue
		}
		if got := r.String(); got != s {
			t.Errorf("String() = %q, want %q", got, s)
		}
	}
	r, err := envelope.ParseChunkRange("bytes 262144-524288 of 524288")
	if err != nil {
		t.Fatal(err)
	}
	if want := (envelope.ChunkRange{Start: 262144, End: 524288, Total: 524288}); r != want || r.Len() != 262144 || !r.Last() {
		t.Errorf("got %+v (len %d, last %v)", r, r.Len(), r.Last())
	}
	if r, _ := envelope.ParseChunkRange("bytes 0-262144 of 524288"); r.Last() {
		t.Error("a first chunk of two reports Last")
	}
}

func TestParseChunkRangeRejects(t *testing.T) {
	for _, s := range []string{
		"", "bytes", "bytes 0-5", "bytes 0-5 of", "bytes 0-5 of ", "0-5 of 10", "bytes 5-5 of 10",
		"bytes 6-5 of 10", "bytes 0-11 of 10", "bytes 0-262145 of 1000000", "bytes -1-5 of 10",
		"bytes 01-5 of 10", "bytes 0-05 of 10", "bytes 0-5 of 010", "bytes 0x0-5 of 10",
		"bytes 0-256k of 512k", "bytes 0-5 of 10\n", "bytes  0-5 of 10", "bytes 0-5 of 10 of 10",
		"bytes 0-5 of 99999999999999999", "bytes 0-5 of 1125899906842625", "bytes ٠-٥ of ١٠",
	} {
		if r, err := envelope.ParseChunkRange(s); err == nil {
			t.Errorf("ParseChunkRange(%q) = %+v, want an error", s, r)
		}
	}
}
