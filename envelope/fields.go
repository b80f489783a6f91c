package envelope

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/chiffon-dev/chiffon/errcodes"
)

// object reads the members of one JSON object strictly. The first rule broken is kept
// in err and later reads become no-ops, so a schema reads as a straight list of fields.
type object struct {
	t   *tape
	tok int // the index of the object's '{' token in t
	// parent and name give the object's dotted path, which only an error needs, so
	// it is put together only then.
	parent *object
	name   string
	err    *errcodes.Error
	// dec holds the objects of one decode, so that opening one allocates nothing.
	dec *decoding
	// distinct says no key is given twice, so a lookup can stop at the first match;
	// cursor is the key after the one found last, where the next search starts.
	distinct bool
	cursor   int
}

// path is the object's dotted path, "" for the envelope.
func (o *object) path() string {
	if o.parent == nil {
		return o.name
	}
	return o.parent.at(o.name)
}

// sub opens a nested object member. A value that is not an object (null included)
// is reported on the member's path.
func (o *object) sub(key string, required bool) *object {
	k, ok := o.member(key, required)
	if !ok {
		return nil
	}
	if c := o.t.toks[k].kind; c != '{' {
		o.err = errcodes.NewInvalidMessage(o.at(key), "must be an object, got %s", kindName(c))
		return nil
	}
	return o.dec.object(k, o, key)
}

// close reports the first key not in known, in sorted order, and ends the read.
func (o *object) close(known ...string) *errcodes.Error {
	if o.err != nil {
		return o.err
	}
	var first string
	found := false
	j := 0 // keys mostly come in the order of known: try the next one first
	for k := range o.keys() {
		if j < len(known) && o.t.textIs(k, known[j]) {
			j++
			continue
		}
		if o.t.textIn(k, known) {
			continue
		}
		if key := o.t.text(k); !found || key < first {
			first, found = key, true
		}
	}
	if found {
		if hint, ok := legacyFieldHints[first]; ok {
			o.err = errcodes.NewInvalidMessage(o.at(first), "unknown field %q: %s", first, hint)
		} else {
			o.err = errcodes.NewInvalidMessage(o.at(first), "unknown field %q", first)
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
	p := o.path()
	if p == "" {
		return key
	}
	return p + "." + key
}

func (o *object) fail(key, format string, args ...any) {
	if o.err == nil {
		o.err = errcodes.NewInvalidMessage(o.at(key), format, args...)
	}
}

// keys yields the token index of each key of the object, in input order, repeated
// keys included; a key's value is the token after it.
func (o *object) keys() func(yield func(int) bool) {
	return func(yield func(int) bool) {
		t := o.t
		for k, end := o.tok+1, t.toks[o.tok].next; k < end; k = t.toks[k+1].next {
			if !yield(k) {
				return
			}
		}
	}
}

// lookup returns the token index of key's value, the last one when key is repeated
// (as json.Unmarshal keeps it), or -1.
func (o *object) lookup(key string) int {
	t := o.t
	if !o.distinct {
		v := -1
		for k := range o.keys() {
			if t.textIs(k, key) {
				v = k + 1
			}
		}
		return v
	}
	// Schemas read keys in about the order senders write them, so the search starts
	// after the key found last and wraps around.
	from, end := o.cursor, t.toks[o.tok].next
	if k := o.find(key, from, end); k >= 0 {
		return k
	}
	return o.find(key, o.tok+1, from)
}

// find looks for key among the distinct keys from token from up to token to.
func (o *object) find(key string, from, to int) int {
	t := o.t
	for k := from; k < to; k = t.toks[k+1].next {
		if t.textIs(k, key) {
			o.cursor = t.toks[k+1].next
			return k + 1
		}
	}
	return -1
}

// maxDistinctKeys bounds the objects whose keys are checked for repeats, a check
// that can compare every pair; a schema's objects have a dozen keys at most.
const maxDistinctKeys = 16

// distinctKeys reports whether the object at token obj has at most maxDistinctKeys
// keys and no two alike. Keys of different lengths differ, so only a key whose length
// was seen before is compared with the others.
func (t *tape) distinctKeys(obj int) bool {
	var lengths uint64 // bit n is set once a key of length n (under 64) is seen
	n := 0
	for k := obj + 1; k < t.toks[obj].next; k = t.toks[k+1].next {
		if n++; n > maxDistinctKeys {
			return false
		}
		l := uint(len(t.decoded(k)))
		if l >= 64 || lengths&(1<<l) != 0 {
			if t.repeatsKey(obj, k) {
				return false
			}
		}
		lengths |= 1 << (l & 63)
	}
	return true
}

// repeatsKey reports whether a key before the key k of the object at obj is the same.
func (t *tape) repeatsKey(obj, k int) bool {
	key := t.decoded(k)
	for p := obj + 1; p < k; p = t.toks[p+1].next {
		if string(t.decoded(p)) == string(key) {
			return true
		}
	}
	return false
}

func (o *object) has(key string) bool { return o.lookup(key) >= 0 }

// member returns the token index of key's value. A missing required key fails; a
// null value always fails, since no field of the protocol is nullable.
func (o *object) member(key string, required bool) (int, bool) {
	if o.err != nil {
		return -1, false
	}
	k := o.lookup(key)
	if k < 0 {
		if required {
			o.fail(key, "required field is missing")
		}
		return -1, false
	}
	if o.t.toks[k].kind == 'n' {
		o.fail(key, "must not be null")
		return -1, false
	}
	return k, true
}

// stringMember returns the token index of a string member.
func (o *object) stringMember(key string, required bool) (int, bool) {
	k, ok := o.member(key, required)
	if !ok {
		return -1, false
	}
	if c := o.t.toks[k].kind; c != '"' {
		o.fail(key, "must be a string, got %s", kindName(c))
		return -1, false
	}
	return k, true
}

// str reads a string member; "" when absent.
func (o *object) str(key string, required bool) string {
	s, _ := o.text(key, required, nil)
	return s
}

// text reads a string member and reports whether it was there. A value equal to one
// of words (which may be nil) is returned as that element rather than as a copy, so
// that the protocol's fixed words cost no allocation.
func (o *object) text(key string, required bool, words []string) (string, bool) {
	k, ok := o.stringMember(key, required)
	if !ok {
		return "", false
	}
	return o.t.textFrom(k, words), true
}

// word reads a required string member that is most often one of words.
func (o *object) word(key string, words []string) string {
	s, _ := o.text(key, true, words)
	return s
}

// integer reads an integer member; 0 when absent.
func (o *object) integer(key string, required bool) int64 {
	n, _ := o.readInteger(key, required)
	return n
}

// intRange reads an integer member that must lie in [lo, hi].
func (o *object) intRange(key string, required bool, lo, hi int64) int64 {
	n, ok := o.readInteger(key, required)
	if ok && (n < lo || n > hi) {
		o.fail(key, "must be between %d and %d, got %d", lo, hi, n)
	}
	return n
}

// readInteger reads an integer member and reports whether it was there. Only
// integer literals are accepted: 1.0 and 1e3 are numbers but not integers.
func (o *object) readInteger(key string, required bool) (int64, bool) {
	k, ok := o.member(key, required)
	if !ok {
		return 0, false
	}
	if c := o.t.toks[k].kind; c != '0' {
		o.fail(key, "must be an integer, got %s", kindName(c))
		return 0, false
	}
	raw := o.t.raw(k)
	if bytes.ContainsAny(raw, ".eE") {
		o.fail(key, "must be an integer, got %s", raw)
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		o.fail(key, "integer out of range: %s", raw)
		return 0, false
	}
	return n, true
}

func (o *object) boolean(key string, required bool) bool {
	k, ok := o.member(key, required)
	if !ok {
		return false
	}
	switch c := o.t.toks[k].kind; c {
	case 't':
		return true
	case 'f':
		return false
	default:
		o.fail(key, "must be a boolean, got %s", kindName(c))
		return false
	}
}

// strings reads an array of strings, checking each with check (which may be nil).
func (o *object) strings(key string, required bool, check func(string) string) []string {
	k, ok := o.member(key, required)
	if !ok {
		return nil
	}
	t := o.t
	if c := t.toks[k].kind; c != '[' {
		o.fail(key, "must be an array of strings, got %s", kindName(c))
		return nil
	}
	n := t.count(k)
	if n == 0 && !required {
		// An empty optional array means the same as an absent one, which is how
		// Encode writes it (omitempty); reading it as nil keeps a round trip exact.
		return nil
	}
	out := make([]string, 0, n)
	for i, e := 0, k+1; e < t.toks[k].next; i, e = i+1, t.toks[e].next {
		if c := t.toks[e].kind; c != '"' {
			o.fail(elemKey(key, i), "must be a string, got %s", kindName(c))
			return nil
		}
		s := t.text(e)
		if check != nil {
			if msg := check(s); msg != "" {
				o.fail(elemKey(key, i), "%s", msg)
				return nil
			}
		}
		out = append(out, s)
	}
	return out
}

// elemKey names element i of the array member key.
func elemKey(key string, i int) string { return key + "[" + strconv.Itoa(i) + "]" }

// anyMap reads an object member of free-form content, numbers kept as json.Number.
func (o *object) anyMap(key string, required bool) map[string]any {
	k, ok := o.member(key, required)
	if !ok {
		return nil
	}
	m, err := o.t.freeMap(k)
	if err != "" {
		o.fail(key, "%s", err)
	}
	return m
}

// others returns the members whose keys are not in known, compacted, or nil.
func (o *object) others(known ...string) map[string]json.RawMessage {
	var out map[string]json.RawMessage
	for k := range o.keys() {
		if o.t.textIn(k, known) {
			continue
		}
		if out == nil {
			out = make(map[string]json.RawMessage)
		}
		out[o.t.text(k)] = compact(o.t.raw(k + 1))
	}
	return out
}

// textIn reports whether the string at token k is one of words.
func (t *tape) textIn(k int, words []string) bool {
	text := t.decoded(k)
	for _, w := range words {
		if string(text) == w {
			return true
		}
	}
	return false
}

// textFrom returns the string at token k, as the element of words it equals if any.
func (t *tape) textFrom(k int, words []string) string {
	text := t.decoded(k)
	for _, w := range words {
		if string(text) == w {
			return w
		}
	}
	return string(text)
}

// count returns the number of values in the array, or members in the object, at k.
func (t *tape) count(k int) int {
	step := 1 // an array holds values
	if t.toks[k].kind == '{' {
		step = 2 // an object holds keys, each followed by its value
	}
	n := 0
	for e := k + 1; e < t.toks[k].next; e = t.toks[e+step-1].next {
		n++
	}
	return n
}

// freeMap decodes the object at token k as json.Decoder with UseNumber would:
// numbers as json.Number, nested objects and arrays never nil, a repeated key keeping
// its last value. An empty object reads as nil, like an absent one.
func (t *tape) freeMap(k int) (map[string]any, string) {
	if c := t.toks[k].kind; c != '{' {
		return nil, "must be an object, got " + kindName(c)
	}
	if t.count(k) == 0 {
		return nil, ""
	}
	r := freeReader{t: t, left: t.shortBytes(k)}
	return r.object(k), ""
}

// freeReader decodes free-form content. It copies the short strings of one object,
// keys, texts and numbers, into shared blocks: one allocation per block rather than
// one per string. A block is small, so a string kept on its own keeps little alive.
type freeReader struct {
	t     *tape
	block strings.Builder
	left  int // bytes of short strings still to copy, to size the next block
}

const (
	maxShortString = 64   // longer strings get an allocation of their own
	maxBlock       = 1024 // the most a retained short string can keep alive
)

// shortBytes counts the bytes freeReader will copy into blocks for the value at k.
func (t *tape) shortBytes(k int) int {
	n := 0
	for e := k; e < t.toks[k].next; e++ {
		if b, ok := t.shortText(e); ok {
			n += len(b)
		}
	}
	return n
}

// shortText returns the text of the string or number at token k, and whether it goes
// into a block.
func (t *tape) shortText(k int) ([]byte, bool) {
	var b []byte
	switch t.toks[k].kind {
	case '"':
		b = t.decoded(k)
	case '0':
		b = t.raw(k)
	default:
		return nil, false
	}
	return b, 0 < len(b) && len(b) <= maxShortString
}

// text returns a copy of the text of the string or number at token k, in a block
// when it is short.
func (r *freeReader) text(k int) string {
	b, short := r.t.shortText(k)
	if !short {
		return string(b)
	}
	if r.block.Cap()-r.block.Len() < len(b) {
		// A new block: the strings already cut keep the old one, which is never
		// written again.
		r.block = strings.Builder{}
		r.block.Grow(min(max(r.left, len(b)), maxBlock))
	}
	n := r.block.Len()
	r.block.Write(b)
	r.left -= len(b)
	return r.block.String()[n:]
}

func (r *freeReader) value(k int) any {
	switch r.t.toks[k].kind {
	case '{':
		return r.object(k)
	case '[':
		return r.array(k)
	case '"':
		return r.text(k)
	case 't':
		return true
	case 'f':
		return false
	case 'n':
		return nil
	}
	return json.Number(r.text(k))
}

func (r *freeReader) object(k int) map[string]any {
	t := r.t
	m := make(map[string]any, t.count(k))
	for key := k + 1; key < t.toks[k].next; key = t.toks[key+1].next {
		m[r.text(key)] = r.value(key + 1)
	}
	return m
}

func (r *freeReader) array(k int) []any {
	t := r.t
	out := make([]any, 0, t.count(k))
	for e := k + 1; e < t.toks[k].next; e = t.toks[e].next {
		out = append(out, r.value(e))
	}
	return out
}

// kindName names the JSON type of a token kind, as error messages say it.
func kindName(c byte) string {
	switch c {
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
	}
	return "number"
}
