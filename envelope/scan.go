package envelope

import (
	"encoding/binary"
	"math/bits"
	"strings"
	"unicode"
	"unicode/utf16"
)

// This file is the decoder's one pass over the bytes. parse checks the grammar exactly
// as json.Valid does and records every value as a token, so that reading the envelope
// afterwards never scans a byte again, except to copy a string out of it. Before, each
// nesting level re-scanned what it held, and a 256 KiB output was read five times.

// maxDepth is encoding/json's nesting limit: deeper input is not valid JSON to it.
const maxDepth = 10000

// A token is one value of the input, or one object key.
type token struct {
	start, end int // the value's bytes, quotes and brackets included
	// next is the index of the token after this value and everything in it. While the
	// parser is inside a container, the container's next holds the enclosing one.
	next int
	kind byte // '{', '[', '"', '0' (any number), 't', 'f' or 'n'
	// escaped marks a string holding a backslash: only those need decoding.
	escaped bool
}

// tape is parsed input: its tokens in input order, each container followed by its
// content, and an object's content alternating key and value.
type tape struct {
	data []byte
	toks []token
}

// parse tokenizes data, reporting whether it is one JSON value with optional
// surrounding whitespace, with json.Valid's grammar and nesting limit.
func (t *tape) parse(data []byte) bool {
	t.data, t.toks = data, t.toks[:0]
	d := data
	open, depth := -1, 0 // the innermost container not yet closed, and how deep it is
	i := skipWS(d, 0)
	for {
		// A value starts at i: a container is opened, anything else read whole.
		if i < len(d) && (d[i] == '{' || d[i] == '[') {
			if depth++; depth > maxDepth {
				return false
			}
			t.toks = append(t.toks, token{start: i, next: open, kind: d[i]})
			open = len(t.toks) - 1
			if i = skipWS(d, i+1); i < len(d) && d[i] != closer(d[t.toks[open].start]) {
				if i = t.memberStart(open, i); i < 0 {
					return false
				}
				continue
			}
		} else if i = t.scalar(i); i < 0 {
			return false
		} else {
			i = skipWS(d, i)
		}
		// A value ended before i: close every container it completes.
		for {
			if open < 0 {
				return i == len(d)
			}
			if i >= len(d) {
				return false
			}
			c := &t.toks[open]
			if d[i] == ',' {
				if i = t.memberStart(open, skipWS(d, i+1)); i < 0 {
					return false
				}
				break
			}
			if d[i] != closer(c.kind) {
				return false
			}
			c.end = i + 1
			open, c.next = c.next, len(t.toks)
			depth--
			i = skipWS(d, i+1)
		}
	}
}

// closer is the byte that ends a container opened by c.
func closer(c byte) byte {
	if c == '{' {
		return '}'
	}
	return ']'
}

// memberStart reads, inside the container at index open, what comes before a member's
// value: nothing in an array, the key and its colon in an object. It returns where the
// value starts, or -1.
func (t *tape) memberStart(open, i int) int {
	if t.toks[open].kind == '[' {
		return i
	}
	d := t.data
	if i >= len(d) || d[i] != '"' {
		return -1
	}
	if i = t.scalar(i); i < 0 {
		return -1
	}
	if i = skipWS(d, i); i >= len(d) || d[i] != ':' {
		return -1
	}
	return skipWS(d, i+1)
}

// scalar reads the string, number or literal at i as one token and returns the index
// after it, or -1.
func (t *tape) scalar(i int) int {
	d := t.data
	if i >= len(d) {
		return -1
	}
	tok := token{start: i, kind: d[i], next: len(t.toks) + 1}
	switch c := d[i]; {
	case c == '"':
		i, tok.escaped = scanString(d, i)
	case c == '-' || isDigit(c):
		i, tok.kind = scanNumber(d, i), '0'
	case c == 't':
		i = scanLiteral(d, i, "true")
	case c == 'f':
		i = scanLiteral(d, i, "false")
	case c == 'n':
		i = scanLiteral(d, i, "null")
	default:
		return -1
	}
	if i < 0 {
		return -1
	}
	tok.end = i
	t.toks = append(t.toks, tok)
	return i
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(data []byte, i int) int {
	for i < len(data) && isWS(data[i]) {
		i++
	}
	return i
}

func scanLiteral(d []byte, i int, lit string) int {
	if len(d)-i < len(lit) || string(d[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// scanNumber checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at i and returns
// the index after it, or -1.
func scanNumber(d []byte, i int) int {
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = skipDigits(d, i+1)
	default:
		return -1
	}
	if i < len(d) && d[i] == '.' {
		if i++; i >= len(d) || !isDigit(d[i]) {
			return -1
		}
		i = skipDigits(d, i)
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		if i++; i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return -1
		}
		i = skipDigits(d, i)
	}
	return i
}

func skipDigits(d []byte, i int) int {
	for i < len(d) && isDigit(d[i]) {
		i++
	}
	return i
}

// scanString checks the string starting at the quote at i. It returns the index after
// the closing quote, or -1, and whether the string holds an escape.
func scanString(d []byte, i int) (end int, escaped bool) {
	for i++; ; {
		if i = skipPlain(d, i); i >= len(d) {
			return -1, false
		}
		switch d[i] {
		case '"':
			return i + 1, escaped
		case '\\':
			n := escapeLen(d[i:])
			if n == 0 {
				return -1, false
			}
			i += n
			escaped = true
		default: // a control character
			return -1, false
		}
	}
}

// escapeLen returns the length of the valid escape at the start of s, or 0.
func escapeLen(s []byte) int {
	if len(s) < 2 {
		return 0
	}
	switch s[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if len(s) >= 6 && isHex(s[2]) && isHex(s[3]) && isHex(s[4]) && isHex(s[5]) {
			return 6
		}
	}
	return 0
}

// strSafe marks the bytes that may appear in a JSON string as themselves: not a
// control character, not '"' and not '\\'.
var strSafe = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipPlain returns the index of the first byte at or after i that a string may not
// hold as itself, or len(d). Output text is mostly plain, so it tests eight bytes at
// a time.
func skipPlain(d []byte, i int) int {
	for ; i+8 <= len(d); i += 8 {
		if m := notPlain(binary.LittleEndian.Uint64(d[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(d) && strSafe[d[i]] {
		i++
	}
	return i
}

const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

// notPlain sets the high bit of each byte of w (eight bytes, little-endian) that is a
// control character, '"' or '\\'. Only the lowest bit set is exact: a borrow can set
// bits above it. (x - lowBits) &^ x has a byte's high bit set when that byte is zero;
// (w - 0x20*lowBits) &^ w when it is below 0x20.
func notPlain(w uint64) uint64 {
	q := w ^ ('"' * lowBits)
	b := w ^ ('\\' * lowBits)
	return ((w-0x20*lowBits)&^w | (q-lowBits)&^q | (b-lowBits)&^b) & highBits
}

// indexBackslash returns the index of the first '\\' in s, or len(s).
func indexBackslash(s []byte) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		b := binary.LittleEndian.Uint64(s[i:]) ^ ('\\' * lowBits)
		if m := (b - lowBits) &^ b & highBits; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(s) && s[i] != '\\' {
		i++
	}
	return i
}

// unquote decodes a valid JSON string literal as json.Unmarshal does, including its
// replacement of unpaired surrogate escapes by U+FFFD. The result never shares
// memory with s: NATS reuses a message's buffer once its handler returns.
func unquote(s []byte) string {
	s = s[1 : len(s)-1]
	r := indexBackslash(s)
	if r == len(s) {
		return string(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	b.Write(s[:r])
	for r < len(s) {
		if s[r] != '\\' {
			n := indexBackslash(s[r:])
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

// text returns the decoded string at token k, which never shares memory with the
// input.
func (t *tape) text(k int) string {
	if !t.toks[k].escaped {
		return string(t.content(k))
	}
	return unquote(t.raw(k))
}

// content returns the bytes between the quotes of the string at token k.
func (t *tape) content(k int) []byte {
	tok := &t.toks[k]
	return t.data[tok.start+1 : tok.end-1]
}

// raw returns the bytes of the value at token k.
func (t *tape) raw(k int) []byte {
	tok := &t.toks[k]
	return t.data[tok.start:tok.end]
}

// textIs reports whether the string at token k decodes to s, without allocating
// for a string that has no escape.
func (t *tape) textIs(k int, s string) bool {
	raw := t.content(k)
	if !t.toks[k].escaped {
		return string(raw) == s
	}
	// An escape never decodes to more bytes than it takes, so a shorter raw string
	// cannot match; a key of a known object is short, so decoding one is rare.
	return len(raw) >= len(s) && t.text(k) == s
}
