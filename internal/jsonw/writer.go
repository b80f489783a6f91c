package jsonw

import (
	"strconv"
	"time"
)

// Writer is the building block of a hand-written encoder: it appends to Buf what
// encoding/json writes (HTML escaping off) for each value. A value it cannot write as
// encoding/json would (a time MarshalJSON refuses, a free-form value encoding/json
// fails on) sets Failed, and the caller encodes the whole value with encoding/json
// instead, which then reports its own error. Checking Failed once at the end keeps
// the encoder straight-line.
type Writer struct {
	// Buf is the JSON written so far.
	Buf []byte
	// Failed is set once a value could not be written.
	Failed bool
}

// Raw appends s as it is: punctuation and member names.
func (w *Writer) Raw(s string) { w.Buf = append(w.Buf, s...) }

// String appends s as a JSON string.
func (w *Writer) String(s string) { w.Buf = AppendString(w.Buf, s) }

// Int appends n.
func (w *Writer) Int(n int64) { w.Buf = strconv.AppendInt(w.Buf, n, 10) }

// Bool appends true or false.
func (w *Writer) Bool(b bool) { w.Buf = strconv.AppendBool(w.Buf, b) }

// Time appends t as time.Time.MarshalJSON writes it, or sets Failed.
func (w *Writer) Time(t time.Time) {
	var ok bool
	if w.Buf, ok = AppendTime(w.Buf, t); !ok {
		w.Failed = true
	}
}

// Value appends a free-form value through encoding/json, or sets Failed.
func (w *Writer) Value(v any) {
	var err error
	if w.Buf, err = AppendValue(w.Buf, v); err != nil {
		w.Failed = true
	}
}
