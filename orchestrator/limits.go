package orchestrator

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

// headerRoom is what a message keeps of the broker's max_payload for its NATS
// headers (the auth token and agent id), as agent/stream.go's maxMessage does.
const headerRoom = 1024

// ErrTooLarge is what every *TooLargeError is (errors.Is).
var ErrTooLarge = errors.New("task too large for one broker message")

// TooLargeError says a task's work_request would not fit in one broker message. A
// submission refused with it was neither stored nor sent.
type TooLargeError struct {
	// Size is the encoded work_request, in bytes.
	Size int
	// Limit is the largest work_request the broker and the agents accept, in bytes.
	Limit int
}

// Error names the size and the limit.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("work_request would be %d bytes, over the limit of %d bytes (one broker message less %d for headers)",
		e.Size, e.Limit, headerRoom)
}

// Is reports whether target is ErrTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// maxWorkRequest is the largest encoded work_request that both the broker and a
// strict receiver accept, headers aside.
func (o *Orchestrator) maxWorkRequest() int {
	m := int(o.nc.MaxPayload()) // 0 until connected
	if m <= 0 || m > envelope.MaxEnvelopeSize {
		m = envelope.MaxEnvelopeSize
	}
	return m - headerRoom
}

// checkSize refuses a valid submission whose work_request would not fit in one
// broker message, before anything is stored: sent, it would fail every attempt and
// feed its agent's breaker. It measures the envelope dispatch sends: ids have a fixed
// length, and the timestamp is given its longest form (nine fraction digits).
func (o *Orchestrator) checkSize(req *SubmitRequest) error {
	limit := o.maxWorkRequest()
	if n, ok := paramsBound(req.Parameters); ok && n+envelopeRoom <= limit {
		return nil // the common case: far from the limit, no need to encode it
	}
	env := envelope.New(envelope.Orchestrator, req.ToAgent, envelope.NewID(), envelope.NewID(),
		&envelope.WorkRequest{TaskID: envelope.NewID(), WorkType: req.WorkType, Parameters: req.Parameters,
			Hints: hintsEnvelope(req.Hints)})
	env.Timestamp = env.Timestamp.Truncate(time.Second).Add(time.Second - time.Nanosecond)
	data, err := envelope.Encode(env)
	if err != nil {
		return &FieldError{"parameters", "cannot be encoded: " + err.Error()}
	}
	if len(data) > limit {
		o.metrics.tooLarge.Inc()
		o.log.Info("task refused: work_request too large", "to_agent", req.ToAgent, "work_type", req.WorkType,
			"size", len(data), "limit", limit)
		return &TooLargeError{Size: len(data), Limit: limit}
	}
	return nil
}

// envelopeRoom bounds a work_request's encoding without its parameters: the
// envelope's members, a work type of at most 64 bytes and the hints.
const envelopeRoom = 1024

// paramsBound is an upper bound of the encoded size of parameters decoded from
// JSON (or built of the same types), with no encoding: each byte of a string
// encodes to at most 6 ("\u001f"). ok is false for a value of another type, whose
// size only encoding tells.
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
