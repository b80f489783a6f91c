package jsonw

import (
	"math/bits"
	"unicode/utf8"
)

// AppendString appends s as a JSON string exactly as encoding/json writes it with HTML
// escaping off: '"', '\\' and control characters are escaped (\b \f \n \r \t by name,
// others as \u00XX), U+2028 and U+2029 are escaped, and each byte of invalid UTF-8
// becomes \ufffd. '<', '>' and '&' go out as they are.
func AppendString(dst []byte, s string) []byte {
	b := append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Most text is long runs of plain bytes: skip them eight at a time, up to the
		// first byte that is not plain.
		if i+8 <= len(s) {
			m := special8(s[i : i+8])
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) / 8
		} else if c := s[i]; c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			i++
			continue
		}
		size := 1
		if s[i] >= utf8.RuneSelf {
			var r rune
			r, size = utf8.DecodeRuneInString(s[i:])
			if (r != utf8.RuneError || size > 1) && r != '\u2028' && r != '\u2029' {
				i += size // valid UTF-8 goes out as it is
				continue
			}
		}
		b = appendEscape(append(b, s[start:i]...), s[i:i+size])
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendEscape appends the escape of ch: one ASCII byte, one byte of invalid UTF-8, or
// U+2028 or U+2029, which are valid JSON but not valid JavaScript.
func appendEscape(b []byte, ch string) []byte {
	switch c := ch[0]; c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	default:
		if c < utf8.RuneSelf {
			return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
	}
	if len(ch) == 1 {
		return append(b, `\ufffd`...)
	}
	return append(b, '\\', 'u', '2', '0', '2', hexDigits[ch[2]&0xF]) // U+2028 ends in 0xa8, U+2029 in 0xa9
}

const hexDigits = "0123456789abcdef"

// special8 finds the bytes of s, eight long, that are not plain: control characters,
// '"', '\\', and bytes of multi-byte runes. The lowest byte flagged in the result (its
// top bit set) is the first such byte; 0 means there is none. It uses the "haszero"
// and "hasless" tricks of Bit Twiddling Hacks: subtracting 0x20 (or 1) from every
// byte sets the top bit of a byte below 0x20 (or of a zero byte). A borrow can flag a
// byte above one that matched, never below, so the lowest flag is exact.
func special8(s string) uint64 {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	x := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	return (x | (x - ones*0x20) | ((x ^ ones*'"') - ones) | ((x ^ ones*'\\') - ones)) & tops
}
