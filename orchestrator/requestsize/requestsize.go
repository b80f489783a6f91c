// Package requestsize is the size of a task's work_request, the message that
// sends it to an agent: the error of one too large for a broker message or a
// max_request_bytes of the config, and a bound of its size that needs no
// encoding, so that the common task, far below every limit, is never encoded
// only to be measured. It is pure: the core gives it the encoding to measure.
package requestsize

import (
	"encoding/json"
	"fmt"

	"github.com/chiffon-dev/chiffon/api"
)

// HeaderRoom is what a message keeps of the broker's max_payload for its
// NATS headers (the auth token and agent id), as agent/stream.go's maxMessage
// does.
const HeaderRoom = 1024

// EnvelopeRoom bounds a work_request's encoding without its parameters: the
// envelope's members, a work type of at most 64 bytes and the hints.
const EnvelopeRoom = 1024

// TooLargeError says a task's work_request would not fit in one broker
// message, or is over a max_request_bytes of the config. A submission refused
// with it was neither stored nor sent. It is api.ErrTooLarge (errors.Is).
type TooLargeError struct {
	// Size is the encoded work_request, in bytes.
	Size int
	// Limit is the largest work_request accepted, in bytes.
	Limit int
	// Source is the config key of the limit, such as
	// "work_types.build.max_request_bytes" or "agents[code-1].max_request_bytes";
	// "" for the broker's max payload.
	Source string
}

// Error names the size and the limit, and where the limit comes from.
func (e *TooLargeError) Error() string {
	if e.Source != "" {
		return fmt.Sprintf("work_request would be %d bytes, over %s (%d bytes)", e.Size, e.Source, e.Limit)
	}
	return fmt.Sprintf("work_request would be %d bytes, over the limit of %d bytes (one broker message less %d for headers)",
		e.Size, e.Limit, HeaderRoom)
}

// Is reports whether target is api.ErrTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == api.ErrTooLarge }

// Bound is an upper bound of the encoded size of a work_request whose
// parameters are params, decoded from JSON (or built of the same types), with
// no encoding. ok is false when a value of another type is among them, whose
// size only encoding tells.
func Bound(params map[string]any) (n int, ok bool) {
	n, ok = paramsBound(params)
	return n + EnvelopeRoom, ok
}

// paramsBound is an upper bound of the encoded size of v: each byte of a
// string encodes to at most 6 ("\u001f").
func paramsBound(v any) (n int, ok bool) {
	switch v := v.(type) {
	case nil:
		return 4, true
	case bool:
		return 5, true
	case string:
		return 6*len(v) + 2, true
	case json.Number:
		return len(v), true
	case float64, int, int64:
		return 24, true
	case map[string]any:
		n = 2
		for k, x := range v {
			m, ok := paramsBound(x)
			if !ok {
				return 0, false
			}
			n += 6*len(k) + 4 + m
		}
		return n, true
	case []any:
		n = 2
		for _, x := range v {
			m, ok := paramsBound(x)
			if !ok {
				return 0, false
			}
			n += m + 1
		}
		return n, true
	}
	return 0, false
}

// Measure measures one work_request against limits, encoding it at most
// once, and only when Bound cannot tell.
type Measure struct {
	// Params are the task's parameters.
	Params map[string]any
	// Encode encodes the whole work_request and returns its size.
	Encode func() (int, error)

	// bound is Bound's, or -1 when it has none; n is the encoded size once
	// measured (-1: it cannot be encoded).
	bound, n          int
	bounded, measured bool
}

// Over reports whether the work_request is over limit bytes. One that cannot
// be encoded is over none: it fails at dispatch, as it would without a limit.
func (m *Measure) Over(limit int64) bool {
	if !m.bounded {
		m.bounded, m.bound = true, -1
		if b, ok := Bound(m.Params); ok {
			m.bound = b
		}
	}
	if m.bound >= 0 && int64(m.bound) <= limit {
		return false
	}
	if !m.measured {
		m.measured = true
		n, err := m.Encode()
		if err != nil {
			n = -1
		}
		m.n = n
	}
	return int64(m.n) > limit
}

// Size is the encoded size, once Over had to encode it; 0 before, -1 when
// it cannot be encoded.
func (m *Measure) Size() int { return m.n }
