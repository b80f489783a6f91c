package jsonwtest

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"time"
)

// Values makes random values. Fill reaches every exported field by reflection, so a
// field added to a type later is filled too, and an encoder that misses it no longer
// matches encoding/json.
type Values struct {
	r *rand.Rand
}

// New returns a generator whose values are fixed by the seeds, so that a failure can
// be reproduced.
func New(seed1, seed2 uint64) *Values {
	return &Values{r: rand.New(rand.NewPCG(seed1, seed2))}
}

// maxDepth stops recursive types and nested free-form values.
const maxDepth = 6

// Fill sets everything reachable from ptr, a non-nil pointer, to random values: every
// exported struct field, pointers nil or not, slices and maps nil, empty or filled,
// strings from AwkwardPieces, numbers at their limits, times from Time and `any`
// from Any.
func (g *Values) Fill(ptr any) {
	g.fill(reflect.ValueOf(ptr).Elem(), 0)
}

var (
	timeType   = reflect.TypeFor[time.Time]()
	numberType = reflect.TypeFor[json.Number]()
	rawType    = reflect.TypeFor[json.RawMessage]()
)

func (g *Values) fill(v reflect.Value, depth int) {
	if depth > maxDepth {
		return
	}
	switch v.Type() {
	case timeType:
		v.Set(reflect.ValueOf(g.Time()))
		return
	case numberType:
		v.SetString(string(g.Number()))
		return
	case rawType:
		v.SetBytes(g.Raw())
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(g.Text())
	case reflect.Bool:
		v.SetBool(g.r.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(g.Int(v.Type().Bits()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint([]uint64{0, 1, 42, math.MaxUint64, g.r.Uint64()}[g.r.IntN(5)] >> (64 - v.Type().Bits()))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(g.Float())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				g.fill(v.Field(i), depth+1)
			}
		}
	case reflect.Pointer:
		if g.r.IntN(4) == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		g.fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		n, ok := g.length()
		if !ok {
			v.SetZero()
			return
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			g.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			g.fill(v.Index(i), depth+1)
		}
	case reflect.Map:
		n, ok := g.length()
		if !ok {
			v.SetZero()
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), n)
		for range n {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			g.fill(k, depth+1)
			g.fill(e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Interface:
		if v.NumMethod() == 0 {
			if x := g.any(depth + 1); x != nil {
				v.Set(reflect.ValueOf(x))
			}
		}
	}
}

// length picks the length of a slice or map: false for nil, else 0 to 3.
func (g *Values) length() (int, bool) {
	switch g.r.IntN(8) {
	case 0, 1:
		return 0, false
	case 2:
		return 0, true
	}
	return 1 + g.r.IntN(3), true
}

// AwkwardPieces are what Text strings are made of: everything encoding/json escapes
// or leaves alone, invalid UTF-8 among them, and plain runs long enough for an
// escaper that skips eight bytes at a time.
var AwkwardPieces = []string{
	"", "a", "plain text ", `"`, `\`, `\"`, "\n", "\r\n", "\t", "\b", "\f", "\x00", "\x01", "\x1f", "\x7f",
	"<", ">", "&", "<script>", "'", "é", "€", "😀", "\u2028", "\u2029", "\u2027", "\u202a", "\uFFFD",
	"\xff", "\x80", "\xe2\x80", "\xe2\x80\xa8\xa9", "\xed\xa0\x80", "\xf0\x9f\x98", "\xc0\xaf",
	"12345678", "abcdefghijklmnop",
}

// Text returns a string of awkward pieces: often empty, sometimes long.
func (g *Values) Text() string {
	n := g.r.IntN(7)
	if g.r.IntN(8) == 0 {
		n = 40
	}
	var b strings.Builder
	for range n {
		b.WriteString(AwkwardPieces[g.r.IntN(len(AwkwardPieces))])
	}
	return b.String()
}

// Int returns 0, ±1, an ordinary number, the limits of a signed integer of the given
// bits, or any such integer.
func (g *Values) Int(bits int) int64 {
	lim := int64(math.MaxInt64 >> (64 - bits))
	switch g.r.IntN(8) {
	case 0, 1:
		return 0
	case 2:
		return 1
	case 3:
		return -1
	case 4:
		return 42
	case 5:
		return lim
	case 6:
		return -lim - 1
	}
	return int64(g.r.Uint64()) >> (64 - bits)
}

// Float returns a finite float64: zero, small, large, with and without a fraction.
func (g *Values) Float() float64 {
	return []float64{0, 1, -1.5, 0.1, 1e-7, 1e20, 1e21, -1e300, math.SmallestNonzeroFloat64, g.r.NormFloat64() * 1e6}[g.r.IntN(10)]
}

// Number returns a valid json.Number, written as a client might: with a fraction,
// an exponent, a sign, more digits than any integer holds.
func (g *Values) Number() json.Number {
	return json.Number([]string{"0", "1", "-0", "1.50", "-12.25e+3", "1E10", "123456789012345678901234567890", "0.000001"}[g.r.IntN(8)])
}

// Raw returns valid JSON as a client might send it, spaces included, or nil (which
// encoding/json writes as null).
func (g *Values) Raw() json.RawMessage {
	raws := []string{"null", `{ "b" : [ 1 , 2.50 ] , "a" : "<&>" }`, `"\u2028 \u003c"`, "true", "-0", "\"\u2028\"", "[ ]"}
	if i := g.r.IntN(len(raws) + 1); i < len(raws) {
		return json.RawMessage(raws[i])
	}
	return nil
}

// Any returns a free-form value as decoding JSON makes them (maps, slices, strings,
// json.Number, bool, nil), sometimes a float64 or int, and rarely one encoding/json
// refuses (NaN, an invalid number, a channel), so that the error path is tested too.
func (g *Values) Any() any { return g.any(0) }

func (g *Values) any(depth int) any {
	if g.r.IntN(150) == 0 {
		return []any{math.NaN(), json.Number("1e"), make(chan int)}[g.r.IntN(3)]
	}
	n := 9
	if depth >= maxDepth {
		n = 6 // scalars only
	}
	switch g.r.IntN(n) {
	case 0:
		return nil
	case 1:
		return g.Text()
	case 2:
		return g.Number()
	case 3:
		return g.r.IntN(2) == 0
	case 4:
		return g.Float()
	case 5:
		return g.Int(64)
	case 6:
		return g.Raw()
	case 7:
		m := map[string]any{}
		for range g.r.IntN(4) {
			m[g.Text()] = g.any(depth + 1)
		}
		return m
	}
	s := make([]any, g.r.IntN(4))
	for i := range s {
		s[i] = g.any(depth + 1)
	}
	return s
}

// Time returns an instant as a task's clock or a decoder makes them: with and without
// fractions of a second (some with trailing zeros), in UTC and other zones, the zero
// time, a monotonic clock reading; and, rarely, one time.Time.MarshalJSON refuses: a
// year outside 0-9999 in its own zone, a zone offset of 24 hours or more.
func (g *Values) Time() time.Time {
	zones := []*time.Location{time.UTC, time.UTC, time.Local, time.FixedZone("CEST", 2*3600),
		time.FixedZone("", -(9*3600 + 30*60)), time.FixedZone("X", 14*3600), time.FixedZone("", -12*3600),
		time.FixedZone("seconds", 3600+30), time.FixedZone("", -(23*3600 + 59*60))}
	if g.r.IntN(50) == 0 {
		return []time.Time{
			time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC).In(time.FixedZone("", 2*3600)), // year 10000 in its zone
			time.Date(0, 1, 1, 1, 0, 0, 0, time.UTC).In(time.FixedZone("", -2*3600)),      // year -1 in its zone
			time.Date(2025, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600)),
		}[g.r.IntN(4)]
	}
	switch g.r.IntN(20) {
	case 0:
		return time.Time{}
	case 1:
		return time.Now()
	case 2:
		return time.Date(g.r.IntN(100), time.Month(1+g.r.IntN(12)), 1+g.r.IntN(28), 0, 0, 0, g.r.IntN(1e9), time.UTC)
	case 3:
		return time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	}
	t := time.Unix(g.r.Int64N(4e9), int64(g.r.IntN(1e9)))
	switch g.r.IntN(5) {
	case 0:
		t = t.Truncate(time.Second)
	case 1:
		t = t.Truncate(time.Millisecond)
	case 2:
		t = t.Truncate(10 * time.Microsecond)
	}
	return t.In(zones[g.r.IntN(len(zones))])
}
