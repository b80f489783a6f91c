package envelope

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/chiffon-dev/chiffon/errcodes"
)

// object reads the members of one JSON object strictly. The first rule broken is kept
// in err and later reads become no-ops, so a schema reads as a straight list of fields.
type object struct {
	path string
	ms   []member
	err  *errcodes.Error
	// buf holds ms for an object of up to len(buf) members (the envelope has ten),
	// so that opening one costs a single allocation.
	buf [12]member
}

// openObject reads raw, a part of input validJSON has accepted, as a JSON object at
// path. A value that is not an object (null included) is reported on path.
func openObject(raw json.RawMessage, path string) *object {
	o := &object{path: path}
	if kind(raw) != "object" {
		o.err = errcodes.NewInvalidMessage(path, "must be an object, got %s", kind(raw))
		return o
	}
	o.ms = splitObject(raw, o.buf[:0])
	return o
}

// sub opens a nested object member.
func (o *object) sub(key string, required bool) *object {
	raw, ok := o.member(key, required)
	if !ok {
		return nil
	}
	s := openObject(raw, o.at(key))
	if s.err != nil {
		o.err = s.err
		return nil
	}
	return s
}

// close reports the first key not in known, in sorted order, and ends the read.
func (o *object) close(known ...string) *errcodes.Error {
	if o.err != nil {
		return o.err
	}
	var unknown []string
	for _, m := range o.ms {
		if !slices.Contains(known, m.key) {
			unknown = append(unknown, m.key)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		k := unknown[0]
		if hint, ok := legacyFieldHints[k]; ok {
			o.err = errcodes.NewInvalidMessage(o.at(k), "unknown field %q: %s", k, hint)
		} else {
			o.err = errcodes.NewInvalidMessage(o.at(k), "unknown field %q", k)
		}
	}
	return o.err
}

// legacyFieldHints explain the fields the original Python project sent, so that its
// senders learn what to change.
var legacyFieldHints = map[string]string{
	"priority": "Chiffon has no priority field",
	"context":  "error details go in error_context",
}

func (o *object) at(key string) string {
	if o.path == "" {
		return key
	}
	return o.path + "." + key
}

func (o *object) fail(key, format string, args ...any) {
	if o.err == nil {
		o.err = errcodes.NewInvalidMessage(o.at(key), format, args...)
	}
}

// member returns the raw value of key. A missing required key fails; a null value
// always fails, since no field of the protocol is nullable.
func (o *object) member(key string, required bool) (json.RawMessage, bool) {
	if o.err != nil {
		return nil, false
	}
	j := indexMember(o.ms, key)
	if j < 0 {
		if required {
			o.fail(key, "required field is missing")
		}
		return nil, false
	}
	raw := o.ms[j].raw
	if kind(raw) == "null" {
		o.fail(key, "must not be null")
		return nil, false
	}
	return raw, true
}

// str reads a string member; "" when absent.
func (o *object) str(key string, required bool) string {
	raw, ok := o.member(key, required)
	if !ok {
		return ""
	}
	if kind(raw) != "string" {
		o.fail(key, "must be a string, got %s", kind(raw))
		return ""
	}
	return unquote(raw)
}

// integer reads an integer member; 0 when absent. Only integer literals are accepted:
// 1.0 and 1e3 are numbers but not integers.
func (o *object) integer(key string, required bool) int64 {
	raw, ok := o.member(key, required)
	if !ok {
		return 0
	}
	if kind(raw) != "number" {
		o.fail(key, "must be an integer, got %s", kind(raw))
		return 0
	}
	if bytes.ContainsAny(raw, ".eE") {
		o.fail(key, "must be an integer, got %s", raw)
		return 0
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		o.fail(key, "integer out of range: %s", raw)
		return 0
	}
	return n
}

// intRange reads an integer member that must lie in [lo, hi].
func (o *object) intRange(key string, required bool, lo, hi int64) int64 {
	n := o.integer(key, required)
	if o.err == nil && o.has(key) && (n < lo || n > hi) {
		o.fail(key, "must be between %d and %d, got %d", lo, hi, n)
	}
	return n
}

func (o *object) boolean(key string, required bool) bool {
	raw, ok := o.member(key, required)
	if !ok {
		return false
	}
	switch string(raw) {
	case "true":
		return true
	case "false":
		return false
	}
	o.fail(key, "must be a boolean, got %s", kind(raw))
	return false
}

// strings reads an array of strings, checking each with check (which may be nil).
func (o *object) strings(key string, required bool, check func(string) string) []string {
	raw, ok := o.member(key, required)
	if !ok {
		return nil
	}
	if kind(raw) != "array" {
		o.fail(key, "must be an array of strings, got %s", kind(raw))
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		o.fail(key, "malformed array: %v", err)
		return nil
	}
	if len(items) == 0 && !required {
		// An empty optional array means the same as an absent one, which is how
		// Encode writes it (omitempty); reading it as nil keeps a round trip exact.
		return nil
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		elem := key + "[" + strconv.Itoa(i) + "]"
		if kind(it) != "string" {
			o.fail(elem, "must be a string, got %s", kind(it))
			return nil
		}
		var s string
		if err := json.Unmarshal(it, &s); err != nil {
			o.fail(elem, "malformed string: %v", err)
			return nil
		}
		if check != nil {
			if msg := check(s); msg != "" {
				o.fail(elem, "%s", msg)
				return nil
			}
		}
		out = append(out, s)
	}
	return out
}

// anyMap reads an object member of free-form content, numbers kept as json.Number.
func (o *object) anyMap(key string, required bool) map[string]any {
	raw, ok := o.member(key, required)
	if !ok {
		return nil
	}
	m, err := decodeFreeObject(raw)
	if err != "" {
		o.fail(key, "%s", err)
	}
	return m
}

func (o *object) has(key string) bool { return indexMember(o.ms, key) >= 0 }

// decodeFreeObject decodes a JSON object of any content from input validJSON has
// accepted, as json.Decoder with UseNumber would: numbers as json.Number, nested
// objects and arrays never nil, a repeated key keeping its last value.
func decodeFreeObject(raw json.RawMessage) (map[string]any, string) {
	if kind(raw) != "object" {
		return nil, "must be an object, got " + kind(raw)
	}
	m := freeObject(raw)
	if len(m) == 0 {
		return nil, "" // an empty object and an absent one mean the same
	}
	return m, ""
}

func freeValue(raw []byte) any {
	switch raw[0] {
	case '{':
		return freeObject(raw)
	case '[':
		return freeArray(raw)
	case '"':
		return unquote(raw)
	case 't':
		return true
	case 'f':
		return false
	case 'n':
		return nil
	}
	return json.Number(raw)
}

func freeObject(raw []byte) map[string]any {
	var buf [8]member
	ms := splitObject(raw, buf[:0])
	m := make(map[string]any, len(ms))
	for _, mb := range ms {
		m[mb.key] = freeValue(mb.raw)
	}
	return m
}

func freeArray(raw []byte) []any {
	out := []any{}
	i := skipWS(raw, skipWS(raw, 0)+1)
	for raw[i] != ']' {
		end := skipValue(raw, i)
		out = append(out, freeValue(raw[i:end]))
		if i = skipWS(raw, end); raw[i] == ',' {
			i = skipWS(raw, i+1)
		}
	}
	return out
}

// kind names the JSON type of a raw value by its first byte.
func kind(raw []byte) string {
	if len(raw) > 0 && isWS(raw[0]) {
		raw = bytes.TrimLeft(raw, " \t\r\n")
	}
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return "number"
	}
	return "invalid JSON"
}
