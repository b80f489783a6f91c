package requestsize

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
)

// TestParamsBoundIsAnUpperBound: CheckSize skips encoding when the bound says a
// task is far from the limit, so the bound must never be below the encoding.
func TestParamsBoundIsAnUpperBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	nasty := []string{"\x00", "\x1f", "<", ">", "&", "\"", "\\", "\u2028", "\xff", "é", "a"}
	str := func() string {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(nasty[rng.IntN(len(nasty))])
		}
		return b.String()
	}
	var value func(depth int) any
	value = func(depth int) any {
		switch k := rng.IntN(8); {
		case depth > 4 || k == 0:
			return str()
		case k == 1:
			return json.Number("-12345678901234567890")
		case k == 2:
			return -math.MaxFloat64
		case k == 3:
			return nil
		case k == 4:
			return rng.IntN(2) == 0
		case k == 5:
			l := make([]any, rng.IntN(5))
			for i := range l {
				l[i] = value(depth + 1)
			}
			return l
		default:
			m := map[string]any{}
			for range rng.IntN(5) {
				m[str()] = value(depth + 1)
			}
			return m
		}
	}
	for range 2000 {
		params, _ := value(0).(map[string]any)
		if params == nil {
			params = map[string]any{str(): value(1)}
		}
		n, ok := paramsBound(params)
		data, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || n < len(data) {
			t.Fatalf("bound %d (ok %v) below the encoding's %d bytes: %s", n, ok, len(data), data)
		}
	}
	if _, ok := paramsBound(map[string]any{"x": struct{}{}}); ok {
		t.Fatal("a type whose size only encoding tells was bounded")
	}
}

// TestMeasureEncodesOnlyWhenTheBoundCannotTell: a work_request whose bound is
// within the limit is not encoded; one over it is encoded once, whatever the
// number of limits asked; one that cannot be encoded is over none.
func TestMeasureEncodesOnlyWhenTheBoundCannotTell(t *testing.T) {
	small := map[string]any{"n": json.Number("1")}
	big := map[string]any{"s": strings.Repeat("x", 100)} // bound 6*100+2+... over 600
	cases := []struct {
		name    string
		params  map[string]any
		size    int
		err     error
		limits  []int64
		over    []bool
		encodes int
	}{
		{"far below", small, 50, nil, []int64{2000, 5000}, []bool{false, false}, 0},
		{"bound over, encoding under", big, 1200, nil, []int64{1500, 1300}, []bool{false, false}, 1},
		{"bound over, encoding over", big, 1200, nil, []int64{1100, 1000, 1700}, []bool{true, true, false}, 1},
		{"unbounded type", map[string]any{"x": struct{}{}}, 10, nil, []int64{5, 20}, []bool{true, false}, 1},
		{"cannot be encoded", map[string]any{"x": struct{}{}}, 0, errors.New("no"), []int64{1, 5}, []bool{false, false}, 1},
	}
	for _, tc := range cases {
		encodes := 0
		m := Measure{Params: tc.params, Encode: func() (int, error) { encodes++; return tc.size, tc.err }}
		for i, limit := range tc.limits {
			if got := m.Over(limit); got != tc.over[i] {
				t.Errorf("%s: Over(%d) = %v, want %v", tc.name, limit, got, tc.over[i])
			}
		}
		if encodes != tc.encodes {
			t.Errorf("%s: encoded %d times, want %d", tc.name, encodes, tc.encodes)
		}
		if tc.encodes > 0 && tc.err == nil && m.Size() != tc.size {
			t.Errorf("%s: Size %d, want %d", tc.name, m.Size(), tc.size)
		}
	}
}

// TestTooLargeErrorIsErrTooLarge: the error says the size, the limit and its
// key, and is the API's ErrTooLarge.
func TestTooLargeErrorIsErrTooLarge(t *testing.T) {
	e := &TooLargeError{Size: 2000, Limit: 1000, Source: "work_types.build.max_request_bytes"}
	if !errors.Is(e, api.ErrTooLarge) {
		t.Error("not api.ErrTooLarge")
	}
	if got := e.Error(); got != "work_request would be 2000 bytes, over work_types.build.max_request_bytes (1000 bytes)" {
		t.Errorf("message %q", got)
	}
	e.Source = ""
	if got := e.Error(); !strings.Contains(got, "over the limit of 1000 bytes (one broker message less 1024 for headers)") {
		t.Errorf("message %q", got)
	}
}
