package envelope

import (
	"fmt"

	"github.com/chiffon-dev/chiffon/internal/jsonw"
)

// Encode writes e as compact JSON with its timestamp in UTC (RFC 3339, "Z"). HTML
// characters are not escaped, so output text travels as written.
func Encode(e *Envelope) ([]byte, error) {
	if e.Payload == nil {
		return nil, fmt.Errorf("envelope: encode %s: no payload", e.Type)
	}
	if e.Type != e.Payload.MessageType() {
		return nil, fmt.Errorf("envelope: encode: type %q does not match a %s payload", e.Type, e.Payload.MessageType())
	}
	w := envelopeWriter{buf: make([]byte, 0, sizeHint(e))}
	if err := w.envelope(e); err == nil {
		return w.buf, nil
	}
	// The hand-written encoder gives up on what it does not write itself: a year
	// outside 0-9999, a value encoding/json refuses. encoding/json then writes the
	// envelope or reports the error it has always reported.
	c := *e
	c.Timestamp = c.Timestamp.UTC()
	return marshalNoEscape(&c)
}

// marshalNoEscape is json.Marshal without HTML escaping and without the trailing
// newline an Encoder adds.
func marshalNoEscape(v any) ([]byte, error) {
	return jsonw.AppendValue(nil, v)
}
