// Package jsonwtest helps test hand-written JSON encoders against encoding/json: it
// makes random values of any type, full of the values encoders get wrong, and gives
// the bytes encoding/json writes for them.
package jsonwtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// Reference is what a hand-written encoder built on jsonw must match: encoding/json
// with HTML escaping off, without the newline an Encoder ends each value with.
func Reference(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// SameDecoded reports, as an error, how a and b differ once decoded by encoding/json
// into untyped values (numbers as json.Number), or that one of them does not decode.
func SameDecoded(a, b []byte) error {
	va, err := decode(a)
	if err != nil {
		return fmt.Errorf("decode %q: %w", a, err)
	}
	vb, err := decode(b)
	if err != nil {
		return fmt.Errorf("decode %q: %w", b, err)
	}
	if !reflect.DeepEqual(va, vb) {
		return fmt.Errorf("decoded values differ\n%#v\n%#v", va, vb)
	}
	return nil
}

func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}
