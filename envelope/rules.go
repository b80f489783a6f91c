package envelope

import (
	"fmt"
	"time"
)

// ParseID returns s lower-cased, and whether it is an id of the protocol (a message,
// request, trace or task id): a UUID in the canonical 8-4-4-4-12 hex form, either
// case. Every id check of Chiffon, in the decoder, the agent and the HTTP API, is this
// one.
func ParseID(s string) (string, bool) {
	u, ok := lowerUUID(s)
	if !ok {
		return "", false
	}
	return string(u[:]), true
}

// isUUID reports whether s is a UUID in the canonical 8-4-4-4-12 hex form, either case.
func isUUID(s string) bool {
	_, ok := lowerUUID(s)
	return ok
}

// uuidByte maps each hex digit to its lower-case form, '-' to itself and every other
// byte to 0.
var uuidByte = func() (t [256]byte) {
	for _, c := range "0123456789abcdef-" {
		t[c] = byte(c)
	}
	for _, c := range "ABCDEF" {
		t[c] = byte(c) + 'a' - 'A'
	}
	return t
}()

// lowerUUID returns s lower-cased, so that ids compare equal whatever case a sender
// used, and whether it is a UUID in the canonical 8-4-4-4-12 hex form.
func lowerUUID[S string | []byte](s S) (u [36]byte, ok bool) {
	if len(s) != len(u) {
		return u, false
	}
	dashes := 0
	for i := range u {
		if u[i] = uuidByte[s[i]]; u[i] == 0 {
			return u, false
		}
		if u[i] == '-' {
			dashes++
		}
	}
	// Four dashes, all in their places: none is anywhere else.
	return u, dashes == 4 && u[8] == '-' && u[13] == '-' && u[18] == '-' && u[23] == '-'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// lowerASCII lower-cases a UUID so that ids compare equal whatever case a sender used.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// validVersionSyntax reports whether v is MAJOR.MINOR with no sign, space or extra part.
func validVersionSyntax(v string) bool {
	dot := -1
	for i := 0; i < len(v); i++ {
		switch {
		case v[i] == '.' && dot < 0:
			dot = i
		case !isDigit(v[i]):
			return false
		}
	}
	return dot > 0 && dot < len(v)-1
}

// MaxWorkTypeLen bounds the length of a work_type.
const MaxWorkTypeLen = 64

// Bounds of an agent's labels (Register.Labels).
const (
	MaxLabels        = 32
	MaxLabelKeyLen   = 63
	MaxLabelValueLen = 63
)

// CheckLabel says what is wrong with an agent label, or "": a key of 1 to 63
// lower-case letters, digits, '.', '_' or '-', starting with a letter or digit,
// and a value of at most 63 printable ASCII characters.
func CheckLabel(key, value string) string {
	if key == "" || len(key) > MaxLabelKeyLen {
		return fmt.Sprintf("the key must be 1 to %d characters", MaxLabelKeyLen)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		ok := 'a' <= c && c <= 'z' || isDigit(c) || i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return fmt.Sprintf("the key must match [a-z0-9][a-z0-9._-]*, got %q", key)
		}
	}
	if len(value) > MaxLabelValueLen {
		return fmt.Sprintf("the value must be at most %d characters", MaxLabelValueLen)
	}
	for i := 0; i < len(value); i++ {
		if value[i] < 0x20 || value[i] > 0x7e {
			return fmt.Sprintf("the value must be printable ASCII, got %q", value)
		}
	}
	return ""
}

// CheckWorkType returns "" when s is a valid work_type ([a-z][a-z0-9_]*, at most 64),
// or what is wrong with it.
func CheckWorkType(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > MaxWorkTypeLen:
		return fmt.Sprintf("must be at most %d characters", MaxWorkTypeLen)
	case s[0] < 'a' || s[0] > 'z':
		return "must start with a lower-case letter"
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || isDigit(c) || c == '_') {
			return fmt.Sprintf("must match [a-z][a-z0-9_]*, got %q", s)
		}
	}
	return ""
}

// MaxAgentIDLen bounds the length of an agent instance id.
const MaxAgentIDLen = 64

// CheckAgentID returns "" when s is a valid agent instance id, or what is wrong with it.
// Agent ids appear in subject names, so only letters, digits, '-' and '_' are allowed.
func CheckAgentID(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > MaxAgentIDLen {
		return fmt.Sprintf("must be at most %d characters", MaxAgentIDLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c) || c == '-' || c == '_') {
			return fmt.Sprintf("may hold only letters, digits, '-' and '_', got %q", s)
		}
	}
	return ""
}

// ParseTimestamp parses an RFC 3339 date-time exactly as the RFC's grammar allows:
// upper-case T and Z, two-digit fields, an optional fraction after '.', and an offset of
// Z or ±hh:mm within range. The result is in UTC.
func ParseTimestamp(s string) (time.Time, error) {
	if err := checkRFC3339(s); err != "" {
		return time.Time{}, fmt.Errorf("%s", err)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("not a valid date-time: %q", s)
	}
	// An offset can carry 0000-01-01 or 9999-12-31 out of the four-digit years RFC 3339
	// (and Encode) can write once converted to UTC.
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, fmt.Errorf("%q is outside years 0000-9999 in UTC", s)
	}
	return t, nil
}

// utcTimestamp reads the form Encode writes, YYYY-MM-DDTHH:MM:SS[.fraction]Z with at
// most nine digits of fraction, from the bytes where they lie. It reports false for
// anything else, valid or not, which ParseTimestamp then reads; where it reports true,
// ParseTimestamp returns the same time.
func utcTimestamp(b []byte) (time.Time, bool) {
	if len(b) < len("2006-01-02T15:04:05Z") || b[4] != '-' || b[7] != '-' || b[10] != 'T' ||
		b[13] != ':' || b[16] != ':' || b[len(b)-1] != 'Z' {
		return time.Time{}, false
	}
	year, ok1 := digits(b[0:4])
	month, ok2 := digits(b[5:7])
	day, ok3 := digits(b[8:10])
	hour, ok4 := digits(b[11:13])
	minute, ok5 := digits(b[14:16])
	sec, ok6 := digits(b[17:19])
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || month < 1 || month > 12 ||
		day < 1 || day > daysIn(time.Month(month), year) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	nsec := 0
	if frac := b[19 : len(b)-1]; len(frac) > 0 {
		n, ok := digits(frac[1:])
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 || !ok {
			return time.Time{}, false
		}
		nsec = n
		for range 10 - len(frac) {
			nsec *= 10 // to nanoseconds, nine digits after the point
		}
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC), true
}

// digits reads b as a decimal number of digits only.
func digits(b []byte) (n int, ok bool) {
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// daysIn returns the number of days in month of year.
func daysIn(month time.Month, year int) int {
	switch month {
	case time.February:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}

func checkRFC3339(s string) string {
	const bad = "must be an RFC 3339 date-time with a zone, such as 2026-01-19T04:21:04Z"
	// YYYY-MM-DDTHH:MM:SS is 19 bytes; the shortest zone is Z.
	if len(s) < 19 {
		return bad
	}
	for i, c := range []byte(s[:19]) {
		switch i {
		case 4, 7:
			if c != '-' {
				return bad
			}
		case 10:
			if c != 'T' {
				return bad
			}
		case 13, 16:
			if c != ':' {
				return bad
			}
		default:
			if !isDigit(c) {
				return bad
			}
		}
	}
	if two(s[11:13]) > 23 || two(s[14:16]) > 59 || two(s[17:19]) > 59 {
		return "time of day out of range in " + fmt.Sprintf("%q", s)
	}
	rest := s[19:]
	if rest != "" && rest[0] == '.' {
		n := 1
		for n < len(rest) && isDigit(rest[n]) {
			n++
		}
		if n == 1 {
			return bad
		}
		rest = rest[n:]
	}
	switch {
	case rest == "":
		// The old Python project sent naive local times like this one.
		return fmt.Sprintf("%q has no zone: add Z (UTC) or an offset such as +02:00", s)
	case rest == "Z":
		return ""
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':' &&
		isDigit(rest[1]) && isDigit(rest[2]) && isDigit(rest[4]) && isDigit(rest[5]):
		if two(rest[1:3]) > 23 || two(rest[4:6]) > 59 {
			return "zone offset out of range in " + fmt.Sprintf("%q", s)
		}
		return ""
	}
	return bad
}

func two(s string) int { return int(s[0]-'0')*10 + int(s[1]-'0') }
