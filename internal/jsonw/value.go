package jsonw

import (
	"encoding/json"
	"sync"
)

// AppendValue appends v as encoding/json writes it with HTML escaping off, for the
// free-form values (maps of any, json.Number, json.RawMessage, ...) that a
// hand-written encoder leaves to encoding/json. On an error it returns dst unchanged
// and encoding/json's error.
func AppendValue(dst []byte, v any) ([]byte, error) {
	e := valueEncoders.Get().(*valueEncoder)
	defer valueEncoders.Put(e)
	n0 := len(dst)
	e.buf = dst
	err := e.enc.Encode(v)
	b := e.buf
	e.buf = nil // the pool must not keep the caller's buffer alive
	if err != nil {
		return dst[:n0], err
	}
	return b[:len(b)-1], nil // without the newline Encode ends each value with
}

// valueEncoder is a json.Encoder that writes straight into the caller's buffer, so a
// free-form value costs neither a buffer of its own nor a copy.
type valueEncoder struct {
	buf []byte
	enc *json.Encoder
}

// Write appends p to the buffer; the encoder calls it once per value.
func (e *valueEncoder) Write(p []byte) (int, error) {
	e.buf = append(e.buf, p...)
	return len(p), nil
}

// valueEncoders saves an encoder's allocation per value. An Encoder keeps an error
// only when its writer fails, which Write never does, so a pooled one is always fresh.
var valueEncoders = sync.Pool{New: func() any {
	e := new(valueEncoder)
	e.enc = json.NewEncoder(e)
	e.enc.SetEscapeHTML(false)
	return e
}}
