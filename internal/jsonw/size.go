package jsonw

import "encoding/json"

// Widest forms, for encoders that size their buffer once from an estimate.
const (
	// IntSize is the width of the widest int64, math.MinInt64.
	IntSize = len("-9223372036854775808")
	// TimeSize is the width of the widest time AppendTime writes, quotes included.
	TimeSize = len(`"2006-01-02T15:04:05.999999999-07:00"`)
)

// TextSize guesses the encoded size of n bytes of text, quotes left out: an eighth
// more, room for escapes such as "\n".
func TextSize(n int) int { return n + n/8 }

// ValueSize guesses the encoded size of a free-form value from the strings in it, a
// few levels deep; a deeper value, or a cycle (which encoding/json refuses), gets a
// flat guess.
func ValueSize(v any) int { return valueSize(v, 0) }

func valueSize(v any, depth int) int {
	switch v := v.(type) {
	case nil:
		return 4
	case string:
		return TextSize(len(v)) + 2
	case json.Number:
		return len(v)
	case map[string]any:
		if depth < 3 {
			n := 2
			for k, x := range v {
				n += TextSize(len(k)) + 4 + valueSize(x, depth+1)
			}
			return n
		}
	case []any:
		if depth < 3 {
			n := 2
			for _, x := range v {
				n += 1 + valueSize(x, depth+1)
			}
			return n
		}
	}
	return 24
}
