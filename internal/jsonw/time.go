package jsonw

import "time"

// AppendTime appends t, quoted, as time.Time.MarshalJSON writes it: RFC 3339 with as
// many fractional digits as needed, in t's own zone. MarshalJSON refuses a year that
// is not four digits wide and a zone offset of 24 hours or more; for those AppendTime
// returns dst unchanged and false, so that the caller can let encoding/json report
// the error in its own words.
func AppendTime(dst []byte, t time.Time) ([]byte, bool) {
	n0 := len(dst)
	b := t.AppendFormat(append(dst, '"'), time.RFC3339Nano)
	if b[n0+len(`"2006`)] != '-' {
		return dst[:n0], false
	}
	// The offset is "Z" or "±hh:mm"; a wider hour field, or 24 and up, is refused.
	if b[len(b)-1] != 'Z' {
		c := b[len(b)-len("Z07:00")]
		h := 10*(b[len(b)-len("07:00")]-'0') + b[len(b)-len("7:00")] - '0'
		if ('0' <= c && c <= '9') || h >= 24 {
			return dst[:n0], false
		}
	}
	return append(b, '"'), true
}
