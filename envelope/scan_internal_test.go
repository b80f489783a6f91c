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
}

func FuzzValidJSONMatchesEncodingJSON(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := validJSON(data), json.Valid(data); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", data, got, want)
		}
	})
}

func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	for _, s := range scanSeeds {
		if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("validJSON(%.40q) = %v, json.Valid says %v", s, got, want)
		}
	}
}

// FuzzSplitObjectMatchesUnmarshal checks splitObject and unquote against
// json.Unmarshal on every valid UTF-8 object (the decoder only calls them on such
// input).
func FuzzSplitObjectMatchesUnmarshal(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"s":"\ud83d\ude00 \ud83d \u0041","n":-1.5e3,"o":{"k":[1,"]}"]},"t":true}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !utf8.Valid(data) || !validJSON(data) || kind(data) != "object" {
			return
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("json.Unmarshal of a valid object: %v", err)
		}
		got := map[string]json.RawMessage{}
		for _, m := range splitObject(data, nil) {
			got[m.key] = m.raw
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("splitObject(%q) = %q, want %q", data, got, want)
		}
		if got, msg := decodeFreeObject(data); msg != "" || !reflect.DeepEqual(got, freeObjectReference(t, data)) {
			t.Fatalf("decodeFreeObject(%q) = %#v (%s), json.Decoder says %#v", data, got, msg, freeObjectReference(t, data))
		}
		for k, raw := range got {
			if kind(raw) != "string" {
				continue
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatal(err)
			}
			if u := unquote(raw); u != s {
				t.Fatalf("unquote(%q) of key %q = %q, want %q", raw, k, u, s)
			}
		}
	})
}

// freeObjectReference is what decodeFreeObject did before the single-pass decoder.
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
