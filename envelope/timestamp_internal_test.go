package envelope

import (
	"reflect"
	"testing"
)

// timestampSeeds are date-times on the edges of the form utcTimestamp reads.
var timestampSeeds = []string{
	"2026-01-19T04:21:04Z", "2026-01-19T04:21:04.5Z", "2026-01-19T04:21:04.123456789Z",
	"2026-01-19T04:21:04.1234567891Z", "2026-01-19T04:21:04.Z", "2026-01-19T04:21:04,5Z",
	"2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z", "2000-02-29T23:59:59Z", "1900-02-29T00:00:00Z",
	"2026-04-31T00:00:00Z", "2026-12-31T23:59:59.999999999Z", "0000-01-01T00:00:00Z",
	"9999-12-31T23:59:59Z", "2026-13-01T00:00:00Z", "2026-00-10T00:00:00Z", "2026-01-00T00:00:00Z",
	"2026-01-19T24:00:00Z", "2026-01-19T23:60:00Z", "2026-01-19T23:59:60Z", "2026-01-19t04:21:04Z",
	"2026-01-19T04:21:04z", "2026-01-19T04:21:04+00:00", "2026-01-19T04:21:04", "2026-1-19T04:21:04Z",
	"+026-01-19T04:21:04Z", "2026-01-19T04:21:04.-1Z", "2026-01-19T04:21:04.1e3Z", "",
}

func FuzzUTCTimestampMatchesParseTimestamp(f *testing.F) {
	for _, s := range timestampSeeds {
		f.Add(s)
	}
	f.Fuzz(checkUTCTimestamp)
}

func TestUTCTimestampMatchesParseTimestamp(t *testing.T) {
	for _, s := range timestampSeeds {
		checkUTCTimestamp(t, s)
	}
	if _, ok := utcTimestamp([]byte(timestampSeeds[0])); !ok {
		t.Errorf("utcTimestamp(%q) declined the form Encode writes", timestampSeeds[0])
	}
}

// checkUTCTimestamp checks that wherever the decoder's fast path reads s, it reads
// what ParseTimestamp does.
func checkUTCTimestamp(t *testing.T, s string) {
	got, ok := utcTimestamp([]byte(s))
	if !ok {
		return
	}
	want, err := ParseTimestamp(s)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("utcTimestamp(%q) = %v, but ParseTimestamp says %v, %v", s, got, want, err)
	}
}
