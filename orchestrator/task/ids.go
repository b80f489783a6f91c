package task

import (
	"strings"

	"github.com/chiffon-dev/chiffon/envelope"
)

// Ids a person types. A task's or a batch's id is a UUID of 36 characters; a
// person may name it by its short id or by a prefix instead (docs/orchestrator.md,
// "Ids"). The short id is the id's last ShortIDLen hex digits: a UUIDv7's last 12
// digits are random (a derived id's, a hash), so tasks made in the same minute,
// whose ids begin alike, still differ there.
const (
	// ShortIDLen is the length of a short id, in hex digits.
	ShortIDLen = 8
	// MinPrefixLen is the fewest characters of an id's beginning that name it.
	MinPrefixLen = 8
	// lastGroupLen is the length of a UUID's last group: a suffix up to it is
	// a short id too.
	lastGroupLen = 12
	uuidLen      = 36
)

// ShortID returns id's short id, its last ShortIDLen characters; an id shorter
// than that is its own short id.
func ShortID(id string) string {
	if len(id) <= ShortIDLen {
		return id
	}
	return id[len(id)-ShortIDLen:]
}

// ParseIDRef reads what a person typed to name a task or a batch. A whole id
// (any case) comes back as full. Otherwise part is s in lower case when it
// names ids by their end (a short id: ShortIDLen to 12 hex digits) or their
// beginning (MinPrefixLen or more characters of the id's 8-4-4-4-12 form);
// MatchesID says which ids part names. ok is false for anything else.
func ParseIDRef(s string) (full, part string, ok bool) {
	if id, ok := envelope.ParseID(s); ok {
		return id, "", true
	}
	s = strings.ToLower(s)
	if isSuffix(s) || isPrefix(s) {
		return "", s, true
	}
	return "", "", false
}

// MatchesID reports whether part, as ParseIDRef returns it, names id: id
// begins with it, or, for a short id, ends with it.
func MatchesID(id, part string) bool {
	if part == "" {
		return false
	}
	return strings.HasPrefix(id, part) || isSuffix(part) && strings.HasSuffix(id, part)
}

// isSuffix reports whether s is ShortIDLen to 12 lower-case hex digits.
func isSuffix(s string) bool {
	if len(s) < ShortIDLen || len(s) > lastGroupLen {
		return false
	}
	for i := range len(s) {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

// isPrefix reports whether s is the beginning of a lower-case UUID, at least
// MinPrefixLen and fewer than 36 characters.
func isPrefix(s string) bool {
	if len(s) < MinPrefixLen || len(s) >= uuidLen {
		return false
	}
	for i := range len(s) {
		if dash := i == 8 || i == 13 || i == 18 || i == 23; dash != (s[i] == '-') || !dash && !isHex(s[i]) {
			return false
		}
	}
	return true
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }
