package envelope

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// scanSeeds are inputs on the edges of the JSON grammar.
var scanSeeds = []string{
	``, ` `, `{}`, `[]`, `""`, `"a"`, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `1e`, `1e+`, `1E-7`, `.5`,
	`true`, `tru`, `falsey`, `null`, `nul`, `{"a":1,}`, `[1,]`, `[1 2]`, `{"a" 1}`, `{"a":}`, `{,}`,
	`{"a":1}{}`, " \t\r\n{\"a\" : [ 1 , {\"b\":null} ] }\n", `"\u00e9\ud83d\ude00\ud800x\udc00\u12"`,
	`"\'"`, `"\x"`, "\"a\x01\"", `"\"\\\/\b\f\n\r\t"`, `{"a":1,"a":2}`, `{"a\u0062":"c"}`,
	strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
	strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
	`[` + strings.Repeat(`{"x":`, maxDepth-1) + `1` + strings.Repeat(`}`, maxDepth-1) + `]`,
	// Strings long enough for the eight-byte scans, with the byte that stops them at
	// every offset of a word, and escapes on word edges.
	`{"s":"0123456789abcdef\"0123456789\\abcdef\n01234567","t":"abcdefgh\u00e9ijklmnop\ud83d\ude00"}`,
	`{"s":"01234567` + "\x1f" + `89"}`, `{"s":"0123456789abcde` + "\x7f\u00e9\u2028" + `"}`,
	`{"a":"1234567\\","b":"12345678\\\\","c":"\/\/\/\/\/\/\/\/\/"}`, `["0123456789abcdef` + "\t" + `"]`,
	`"0123456789\u0000"`, `"01234567\ud800\ud800\udc00"`, `"01234567\udc00\ud800"`, `"\uDBFF\uDFFF"`,
	// Numbers of every form, valid and not.
	`[0,-0,1,-1,10,0.5,-0.5e10,1E+2,1e-2,12345678901234567890,1.0e0]`, `[00]`, `[-]`, `[1.e1]`,
	`[+1]`, `[0x1]`, `[1e1.5]`, `[.1]`, `[1,2,]`, `[NaN]`, `[Infinity]`, `[-01]`,
	// Whitespace everywhere, repeated keys at every level, empty containers.
	" {\r\n\t\"a\"\t:\r[\n]\n,\"b\" : { } , \"a\" : { \"c\" : [ [ ] , { } ] , \"c\" : 2 } } ",
	`{"k":{"x":1},"k":[],"k":{"y":{"z":[1,{"w":"v"}]}}}`, `{"":0,"":""}`, `{"\u0000":1}`,
	`{"a":true,"b":false,"c":null,"d":[true,false,null]}`, `{"a":tru}`, `{"a":nulll}`, `{"a"}`,
	`{"a":1 "b":2}`, `{"a":1,,"b":2}`, `{"a":1}}`, `[[]`, `[]]`, `{]`, `[}`, `{"a":[}`,
}

func FuzzValidJSONMatchesEncodingJSON(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var tp tape
		if got, want := tp.parse(data), json.Valid(data); got != want {
			t.Fatalf("parse(%q) = %v, json.Valid says %v", data, got, want)
		}
	})
}

func TestParseMatchesEncodingJSON(t *testing.T) {
	for _, s := range scanSeeds {
		var tp tape
		if got, want := tp.parse([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("parse(%.80q) = %v, json.Valid says %v", s, got, want)
		}
	}
}

// FuzzSplitObjectMatchesUnmarshal checks an object's members as the tape gives them,
// free-form decoding and string decoding against encoding/json on every valid UTF-8
// object (the decoder reads only such input). Its name is that of the function it
// first tested, kept for its corpus in testdata.
func FuzzSplitObjectMatchesUnmarshal(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"s":"\ud83d\ude00 \ud83d \u0041","n":-1.5e3,"o":{"k":[1,"]}"]},"t":true}`))
	f.Fuzz(checkObjectMatchesEncodingJSON)
}

func TestObjectsMatchEncodingJSON(t *testing.T) {
	for _, s := range scanSeeds {
		checkObjectMatchesEncodingJSON(t, []byte(s))
	}
}

func checkObjectMatchesEncodingJSON(t *testing.T, data []byte) {
	var tp tape
	if !utf8.Valid(data) || !tp.parse(data) || tp.toks[0].kind != '{' {
		return
	}
	var want map[string]json.RawMessage
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("json.Unmarshal of a valid object: %v", err)
	}
	got := map[string]json.RawMessage{}
	// Look every key up both ways: in any object, and in one known to have distinct
	// keys, where the search stops at the first match.
	for _, distinct := range []bool{false, tp.distinctKeys(0)} {
		o := &object{t: &tp, distinct: distinct, cursor: 1}
		for k := range o.keys() {
			got[tp.text(k)] = tp.raw(k + 1)
			if v := o.lookup(tp.text(k)); !bytes.Equal(tp.raw(v), want[tp.text(k)]) {
				t.Fatalf("lookup(%q) in %q = %q, want the last value %q", tp.text(k), data, tp.raw(v), want[tp.text(k)])
			}
		}
		if o.lookup("\x00absent") != -1 {
			t.Fatalf("lookup of an absent key in %q found one", data)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("members of %q = %q, want %q", data, got, want)
	}
	if got, msg := tp.freeMap(0); msg != "" || !reflect.DeepEqual(got, freeObjectReference(t, data)) {
		t.Fatalf("freeMap(%q) = %#v (%s), json.Decoder says %#v", data, got, msg, freeObjectReference(t, data))
	}
	for k := range tp.toks {
		if tp.toks[k].kind != '"' {
			continue
		}
		var s string
		if err := json.Unmarshal(tp.raw(k), &s); err != nil {
			t.Fatal(err)
		}
		if u := tp.text(k); u != s {
			t.Fatalf("text(%q) = %q, want %q", tp.raw(k), u, s)
		}
		if !tp.textIs(k, s) || tp.textIs(k, s+"x") {
			t.Fatalf("textIs(%q) disagrees with its text %q", tp.raw(k), s)
		}
	}
}

// freeObjectReference is what freeMap did before the single-pass decoder.
func freeObjectReference(t *testing.T, raw []byte) map[string]any {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// TestSkipPlainStopsAtTheFirstSpecialByte checks the eight-byte scan against a byte
// loop, with one byte that a string may not hold as itself at every position.
func TestSkipPlainStopsAtTheFirstSpecialByte(t *testing.T) {
	for _, special := range []byte{'"', '\\', 0x00, 0x1f, '\n'} {
		for _, filler := range []byte{'a', ' ', 0x7f, 0x80, 0xff, '!', '#', '[', ']', 0x21, 0x5b, 0x5d} {
			for n := 0; n < 20; n++ {
				for at := 0; at <= n; at++ {
					d := bytes.Repeat([]byte{filler}, n)
					if at < n {
						d[at] = special
					}
					checkSkipPlain(t, d)
				}
			}
		}
	}
}

// checkSkipPlain compares skipPlain on d with a byte-by-byte loop.
func checkSkipPlain(t *testing.T, d []byte) {
	t.Helper()
	want := 0
	for want < len(d) && strSafe[d[want]] {
		want++
	}
	if got := skipPlain(d, 0); got != want {
		t.Fatalf("skipPlain(%q) = %d, want %d", d, got, want)
	}
}

// TestSkipPlainAgreesOnEveryByte puts each byte value at each position of a word,
// with and without a special byte after it, and compares the scan with a byte loop.
func TestSkipPlainAgreesOnEveryByte(t *testing.T) {
	for c := range 256 {
		for at := range 16 {
			for _, after := range []int{-1, '"', '\\', 0} {
				d := bytes.Repeat([]byte{'a'}, 24)
				d[at] = byte(c)
				if after >= 0 {
					d[at+5] = byte(after)
				}
				checkSkipPlain(t, d)
			}
		}
	}
}

// TestUnescapeAtEveryOffset puts each kind of escape at each offset of a word, with
// text of every length after it, and compares the decoded string with encoding/json.
func TestUnescapeAtEveryOffset(t *testing.T) {
	escapes := []string{
		`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u00e9`, `\u20AC`, `\u0000`, `\ud83d\ude00`,
		`\ud800`, `\udc00`, `\ud800\u0041`, `\ud800\ud800\udc00`, `\udbff\udfff`, `\\\\\"\n\t`,
	}
	var tp tape
	for _, esc := range escapes {
		for before := range 17 {
			for after := range 10 {
				lit := `"` + strings.Repeat("a", before) + esc + strings.Repeat("é", after/2) + strings.Repeat("z", after%2) + `"`
				var want string
				if err := json.Unmarshal([]byte(lit), &want); err != nil {
					t.Fatal(err)
				}
				if !tp.parse([]byte(lit)) {
					t.Fatalf("parse(%s) failed", lit)
				}
				if got := tp.text(0); got != want {
					t.Fatalf("text(%s) = %q, want %q", lit, got, want)
				}
			}
		}
	}
}
