package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	c := *e
	c.Timestamp = c.Timestamp.UTC()
	return marshalNoEscape(&c)
}

// marshalNoEscape is json.Marshal without HTML escaping and without the trailing
// newline an Encoder adds.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
