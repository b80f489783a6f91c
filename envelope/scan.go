package envelope

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is the decoder's one pass over the bytes once utf8.Valid has passed them.
// parse checks the grammar exactly as json.Valid does and records every value as a
// token, decoding the strings that hold escapes as it goes, so that reading the
// envelope afterwards never scans a byte again, except to copy a string out. Before,
// each nesting level re-scanned what it held, and a 256 KiB output was read five
// times.

// maxDepth is encoding/json's nesting limit: deeper input is not valid JSON to it.
const maxDepth = 10000

// A token is one value of the input, or one object key.
type token struct {
	start, end int // the value's bytes, quotes and brackets included
	// next is the index of the token after this value and everything in it. While the
	// parser is inside a container, the container's next holds the enclosing one.
	next int
	kind byte // '{', '[', '"', '0' (any number), 't', 'f' or 'n'
	// escaped marks a string holding a backslash escape. Its decoded text is
	// tape.buf[text:textEnd]; any other string is its bytes between the quotes.
	escaped       bool
	text, textEnd int
}

// tape is parsed input: its tokens in input order, each container followed by its
// content, and an object's content alternating key and value.
type tape struct {
	data []byte
	toks []token
	// buf holds the decoded text of the strings that have escapes, one after the
	// other.
	buf []byte
}

// parse tokenizes data, reporting whether it is one JSON value with optional
// surrounding whitespace, with json.Valid's grammar and nesting limit.
func (t *tape) parse(data []byte) bool {
	z := tokenizer{d: data, toks: t.toks[:0], buf: t.buf[:0]}
	ok := z.run()
	t.data, t.toks, t.buf = data, z.toks, z.buf
	return ok
}

// tokenizer builds a tape. It lives on the stack while it runs, so that appending to
// its slices costs no write barrier.
type tokenizer struct {
	d    []byte
	toks []token
	buf  []byte
}

func (z *tokenizer) run() bool {
	d := z.d
	open, depth := -1, 0 // the innermost container not yet closed, and how deep it is
	i := skipWS(d, 0)
	for {
		// A value starts at i: a container is opened, anything else read whole.
		if i < len(d) && (d[i] == '{' || d[i] == '[') {
			if depth++; depth > maxDepth {
				return false
			}
			c := d[i]
			z.push(c, i).next = open
			open = len(z.toks) - 1
			if i = skipWS(d, i+1); i < len(d) && d[i] != closer(c) {
				if i = z.memberStart(i, open); i < 0 {
					return false
				}
				continue
			}
		} else if i = z.scalar(i); i < 0 {
			return false
		}
		// A value ended before i: close every container it completes.
		for {
			if open < 0 {
				return i == len(d)
			}
			if i >= len(d) {
				return false
			}
			if d[i] == ',' {
				if i = z.memberStart(skipWS(d, i+1), open); i < 0 {
					return false
				}
				break
			}
			c := &z.toks[open]
			if d[i] != closer(c.kind) {
				return false
			}
			c.end = i + 1
			open, c.next = c.next, len(z.toks)
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

// memberStart reads, inside the container at token open, what comes before a
// member's value: nothing in an array, the key and its colon in an object. It returns
// where the value starts, or -1.
func (z *tokenizer) memberStart(i, open int) int {
	if z.toks[open].kind == '[' {
		return i
	}
	d := z.d
	if i >= len(d) || d[i] != '"' {
		return -1
	}
	if i = z.str(i); i < 0 {
		return -1
	}
	if i = skipWS(d, i); i >= len(d) || d[i] != ':' {
		return -1
	}
	return skipWS(d, i+1)
}

// scalar reads the string, number or literal at i as one token and returns the index
// after it and the whitespace that follows, or -1.
func (z *tokenizer) scalar(i int) int {
	d := z.d
	if i >= len(d) {
		return -1
	}
	end := -1
	switch c := d[i]; {
	case c == '"':
		end = z.str(i)
	case c == '-' || isDigit(c):
		end = scanNumber(d, i)
		z.push('0', i).end = end
	case c == 't':
		end = scanLiteral(d, i, "true")
		z.push(c, i).end = end
	case c == 'f':
		end = scanLiteral(d, i, "false")
		z.push(c, i).end = end
	case c == 'n':
		end = scanLiteral(d, i, "null")
		z.push(c, i).end = end
	}
	if end < 0 {
		return -1
	}
	return skipWS(d, end)
}

// push appends a token of kind starting at start, whose next is the token after it,
// and returns it to be completed where it lies rather than built apart and copied.
func (z *tokenizer) push(kind byte, start int) *token {
	z.toks = append(z.toks, token{})
	tok := &z.toks[len(z.toks)-1]
	tok.kind, tok.start, tok.next = kind, start, len(z.toks)
	return tok
}

// isWS reports whether c is JSON whitespace. The first test settles the usual case,
// a byte above the space.
func isWS(c byte) bool { return c <= ' ' && (c == ' ' || c == '\t' || c == '\n' || c == '\r') }

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

// str reads the string starting at the quote at i as one token and returns the index
// after its closing quote, or -1.
func (z *tokenizer) str(i int) int {
	d := z.d
	tok := z.push('"', i)
	i = skipPlain(d, i+1)
	if i < len(d) && d[i] == '"' {
		tok.end = i + 1
		return tok.end
	}
	if i >= len(d) || d[i] != '\\' {
		return -1 // the input ends, or a control character
	}
	tok.escaped = true
	tok.end, tok.text, tok.textEnd = z.decode(tok.start+1, i)
	return tok.end
}

// decode checks the string content starting at start, which holds its first escape
// at esc, and decodes it onto z.buf as json.Unmarshal does, an unpaired surrogate
// escape becoming U+FFFD. It returns the index after the closing quote, or -1, and
// where the text lies in z.buf. Between escapes it copies eight bytes at a time.
func (z *tokenizer) decode(start, esc int) (end, text, textEnd int) {
	d := z.d
	// Decoded text never outgrows the input it comes from, so with room for all the
	// input and eight spare bytes, whole words can be stored past the text's end.
	if cap(z.buf) < len(d)+8 {
		z.buf = slices.Grow(z.buf, len(d)+8-len(z.buf))
	}
	buf := z.buf[:cap(z.buf)]
	text = len(z.buf)
	w := text + copy(buf[text:], d[start:esc])
	for r := esc; ; {
		if r+8 <= len(d) {
			x := binary.LittleEndian.Uint64(d[r:])
			binary.LittleEndian.PutUint64(buf[w:], x)
			m := notPlain(x)
			if m == 0 {
				r, w = r+8, w+8
				continue
			}
			n := bits.TrailingZeros64(m) / 8 // the plain bytes before the first other
			r, w = r+n, w+n
		} else if r < len(d) && strSafe[d[r]] {
			buf[w] = d[r]
			r, w = r+1, w+1
			continue
		}
		switch {
		case r >= len(d):
			return -1, 0, 0
		case d[r] == '"':
			z.buf = buf[:w]
			return r + 1, text, w
		case d[r] != '\\': // a control character
			return -1, 0, 0
		case r+1 < len(d) && unescaped[d[r+1]] != 0:
			buf[w] = unescaped[d[r+1]]
			r, w = r+2, w+1
		case isU4(d[r:]):
			r, w = decodeU4(d, r, buf, w)
		default:
			return -1, 0, 0
		}
	}
}

// unescaped maps the byte after a backslash to the byte the two stand for, and every
// other byte (u among them) to 0.
var unescaped = [256]byte{
	'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t',
}

// isU4 reports whether s starts with a \uXXXX escape.
func isU4(s []byte) bool {
	return len(s) >= 6 && s[1] == 'u' && isHex(s[2]) && isHex(s[3]) && isHex(s[4]) && isHex(s[5])
}

// decodeU4 writes the character of the \uXXXX escape at s[r], or of the surrogate
// pair there, to buf at w, and returns where reading and writing go on.
func decodeU4(s []byte, r int, buf []byte, w int) (int, int) {
	rr := getu4(s[r:])
	r += 6
	if utf16.IsSurrogate(rr) {
		if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
			return r + 6, w + utf8.EncodeRune(buf[w:], dec)
		}
		rr = unicode.ReplacementChar
	}
	return r, w + utf8.EncodeRune(buf[w:], rr)
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
// bits above it. x - lowBits sets a byte's high bit when the byte is zero (or above
// 0x80), w - 0x20*lowBits when it is below 0x20 (or above 0xa0); the mask &^ w drops
// the bytes above 0x80, which are never special, and for the others w, w^'"' and
// w^'\\' share the clear high bit.
func notPlain(w uint64) uint64 {
	q := w ^ ('"' * lowBits)
	b := w ^ ('\\' * lowBits)
	return ((w - 0x20*lowBits) | (q - lowBits) | (b - lowBits)) &^ w & highBits
}

// text returns the decoded string at token k, which never shares memory with the
// input: NATS reuses a message's buffer once its handler returns.
func (t *tape) text(k int) string {
	return string(t.decoded(k))
}

// decoded returns the decoded bytes of the string at token k, in the input or in
// t.buf: they must be copied to be kept.
func (t *tape) decoded(k int) []byte {
	if tok := &t.toks[k]; tok.escaped {
		return t.buf[tok.text:tok.textEnd]
	}
	return t.content(k)
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

// textIs reports whether the string at token k decodes to s.
func (t *tape) textIs(k int, s string) bool {
	return string(t.decoded(k)) == s
}
