package jsonw_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/internal/jsonw"
)

// assertTimeLikeMarshalJSON checks AppendTime against time.Time.MarshalJSON through
// encoding/json: the same bytes, or false exactly when encoding/json fails and then
// dst unchanged.
func assertTimeLikeMarshalJSON(t *testing.T, ts time.Time) {
	t.Helper()
	want, wantErr := json.Marshal(ts)
	got, ok := jsonw.AppendTime([]byte(prefix), ts)
	switch {
	case ok != (wantErr == nil):
		t.Fatalf("AppendTime(%v) ok %v, encoding/json error %v", ts, ok, wantErr)
	case !ok && string(got) != prefix:
		t.Fatalf("AppendTime(%v) failed but changed dst to %q", ts, got)
	case ok && !bytes.Equal(got, append([]byte(prefix), want...)):
		t.Fatalf("AppendTime(%v)\ngot  %s\nwant %s", ts, got[len(prefix):], want)
	}
}

func TestAppendTimeMatchesMarshalJSON(t *testing.T) {
	zones := []*time.Location{
		time.UTC, time.Local, time.FixedZone("CEST", 2*3600), time.FixedZone("", -(9*3600 + 30*60)),
		time.FixedZone("X", 14*3600), time.FixedZone("sec", 3600+30), time.FixedZone("neg sec", -30),
		time.FixedZone("23:59", 23*3600+59*60), time.FixedZone("-23:59", -(23*3600 + 59*60)),
		time.FixedZone("24", 24*3600), time.FixedZone("-24", -24*3600), time.FixedZone("99", 99*3600),
		time.FixedZone("100", 100*3600), time.FixedZone("-123", -123*3600),
	}
	cases := []time.Time{
		{}, time.Now(), time.Unix(0, 0), time.Unix(1<<40, 0), time.Unix(-1<<40, 0),
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(123456, 1, 1, 0, 0, 0, 1, time.UTC),
	}
	r := rand.New(rand.NewPCG(2028, 2029))
	for range 3000 {
		nsec := []int{0, 1, 100, 120000000, 999999999, r.IntN(1e9)}[r.IntN(6)]
		year := []int{0, 1, 99, 1970, 2025, 9999, 10000, -1, r.IntN(12000) - 1000}[r.IntN(9)]
		cases = append(cases, time.Date(year, time.Month(1+r.IntN(12)), 1+r.IntN(31), r.IntN(24), r.IntN(60), r.IntN(60), nsec, time.UTC))
	}
	for _, ts := range cases {
		for _, z := range zones {
			assertTimeLikeMarshalJSON(t, ts.In(z))
		}
	}
}
