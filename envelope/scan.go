package envelope

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf16"
)

// This file is the decoder's single pass over the bytes. validJSON accepts exactly
// what json.Valid accepts; splitObject, skipValue and unquote then walk input that
// validJSON has accepted, returning sub-slices of it rather than copies, so that a
// 256 KiB chunk is scanned a few times at memory speed instead of being re-parsed by
// encoding/json once per nesting level.

// maxDepth is encoding/json's nesting limit: deeper input is not valid JSON to it.
const maxDepth = 10000

// strSafe marks the bytes that may appear in a JSON string as themselves: not a
// control character, not '"' and not '\\'.
var strSafe = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// validJSON reports whether data is one JSON value with optional surrounding
// whitespace, with json.Valid's grammar and nesting limit.
func validJSON(data []byte) bool {
	v := validator{data: data}
	i := v.value(skipWS(data, 0), 0)
	return i >= 0 && skipWS(data, i) == len(data)
}

type validator struct{ data []byte }

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(data []byte, i int) int {
	for i < len(data) && isWS(data[i]) {
		i++
	}
	return i
}

// value checks the value starting at i and returns the index after it, or -1.
func (v *validator) value(i, depth int) int {
	d := v.data
	if i >= len(d) {
		return -1
	}
	switch c := d[i]; {
	case c == '{':
		return v.object(i, depth+1)
	case c == '[':
		return v.array(i, depth+1)
	case c == '"':
		return v.str(i)
	case c == '-' || c >= '0' && c <= '9':
		return v.number(i)
	case c == 't':
		return v.literal(i, "true")
	case c == 'f':
		return v.literal(i, "false")
	case c == 'n':
		return v.literal(i, "null")
	}
	return -1
}

func (v *validator) literal(i int, lit string) int {
	if len(v.data)-i < len(lit) || string(v.data[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

func (v *validator) object(i, depth int) int {
	if depth > maxDepth {
		return -1
	}
	d := v.data
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return -1
		}
		if i = v.str(i); i < 0 {
			return -1
		}
		i = skipWS(d, i)
		if i >= len(d) || d[i] != ':' {
			return -1
		}
		if i = v.value(skipWS(d, i+1), depth); i < 0 {
			return -1
		}
		i = skipWS(d, i)
		if i >= len(d) {
			return -1
		}
		switch d[i] {
		case ',':
			i = skipWS(d, i+1)
		case '}':
			return i + 1
		default:
			return -1
		}
	}
}

func (v *validator) array(i, depth int) int {
	if depth > maxDepth {
		return -1
	}
	d := v.data
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == ']' {
		return i + 1
	}
	for {
		if i = v.value(i, depth); i < 0 {
			return -1
		}
		i = skipWS(d, i)
		if i >= len(d) {
			return -1
		}
		switch d[i] {
		case ',':
			i = skipWS(d, i+1)
		case ']':
			return i + 1
		default:
			return -1
		}
	}
}

// str checks the string starting at the quote at i.
func (v *validator) str(i int) int {
	d := v.data
	for i++; i < len(d); {
		if strSafe[d[i]] {
			i++
			continue
		}
		switch d[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(d) {
				return -1
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(d)-i < 6 || !isHex(d[i+2]) || !isHex(d[i+3]) || !isHex(d[i+4]) || !isHex(d[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default: // a control character
			return -1
		}
	}
	return -1
}

// number checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at i.
func (v *validator) number(i int) int {
	d := v.data
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i++; i < len(d) && isDigit(d[i]); i++ {
		}
	default:
		return -1
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || !isDigit(d[i]) {
			return -1
		}
		for ; i < len(d) && isDigit(d[i]); i++ {
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return -1
		}
		for ; i < len(d) && isDigit(d[i]); i++ {
		}
	}
	return i
}

// member is one key and its raw value (without surrounding whitespace) of an object.
type member struct {
	key string
	raw []byte
}

// splitObject appends the members of the valid JSON object raw to out, in input
// order, and returns the result. A key given twice keeps its last value, as
// json.Unmarshal into a map does.
func splitObject(raw []byte, out []member) []member {
	i := skipWS(raw, 0) + 1 // past '{'
	for {
		i = skipWS(raw, i)
		if raw[i] == '}' {
			return out
		}
		end := skipString(raw, i)
		key := unquote(raw[i:end])
		i = skipWS(raw, end) + 1 // past ':'
		i = skipWS(raw, i)
		end = skipValue(raw, i)
		m := member{key: key, raw: raw[i:end]}
		if j := indexMember(out, key); j >= 0 {
			out[j] = m
		} else {
			out = append(out, m)
		}
		i = skipWS(raw, end)
		if raw[i] == ',' {
			i++
		}
	}
}

func indexMember(ms []member, key string) int {
	for j := range ms {
		if ms[j].key == key {
			return j
		}
	}
	return -1
}

// skipValue returns the index after the valid JSON value starting at i.
func skipValue(d []byte, i int) int {
	switch d[i] {
	case '"':
		return skipString(d, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch d[i] {
			case '"':
				i = skipString(d, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(d) && !isWS(d[i]) && d[i] != ',' && d[i] != '}' && d[i] != ']' {
		i++ // a number or a literal
	}
	return i
}

// skipString returns the index after the valid JSON string starting at the quote at
// i. It jumps from quote to quote (bytes.IndexByte is vectorised); a quote preceded
// by an odd run of backslashes is escaped.
func skipString(d []byte, i int) int {
	for i++; ; i++ {
		i += bytes.IndexByte(d[i:], '"')
		k := i - 1
		for d[k] == '\\' {
			k--
		}
		if (i-1-k)%2 == 0 {
			return i + 1
		}
	}
}

// unquote decodes a valid JSON string literal as json.Unmarshal does, including its
// replacement of unpaired surrogate escapes by U+FFFD. The result never shares
// memory with s.
func unquote(s []byte) string {
	s = s[1 : len(s)-1]
	r := bytes.IndexByte(s, '\\')
	if r < 0 {
		return string(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	b.Write(s[:r])
	for r < len(s) {
		if s[r] != '\\' {
			n := bytes.IndexByte(s[r:], '\\')
			if n < 0 {
				n = len(s) - r
			}
			b.Write(s[r : r+n])
			r += n
			continue
		}
		r++
		switch s[r] {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			rr := getu4(s[r-1:])
			r += 4
			if utf16.IsSurrogate(rr) {
				if dec := utf16.DecodeRune(rr, getu4(s[r+1:])); dec != unicode.ReplacementChar {
					b.WriteRune(dec)
					r += 7
					continue
				}
				rr = unicode.ReplacementChar
			}
			b.WriteRune(rr)
		default: // '"', '\\', '/'
			b.WriteByte(s[r])
		}
		r++
	}
	return b.String()
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c = c - '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
