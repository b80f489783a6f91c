package envelope

import (
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/chiffon-dev/chiffon/internal/jsonw"
)

// The hand-written encoder below writes exactly the bytes encoding/json writes for an
// envelope (HTML escaping off), without reflection. Free-form values and the payloads
// that are rare on the wire still go through encoding/json. append_test.go compares
// the two on generated envelopes of every type, so a change to a payload struct or to
// Hints.MarshalJSON that this file misses fails the tests.

// errSlowPath makes Encode hand the envelope to encoding/json, which then either writes
// it or reports the error it always reported.
var errSlowPath = errors.New("envelope: value needs encoding/json")

// envelopeWriter appends one envelope to buf.
type envelopeWriter struct {
	buf []byte
}

// envelope appends e with its timestamp in UTC.
func (w *envelopeWriter) envelope(e *Envelope) error {
	w.buf = append(w.buf, `{"protocol_version":`...)
	w.str(e.ProtocolVersion)
	w.buf = append(w.buf, `,"message_id":`...)
	w.str(e.MessageID)
	w.buf = append(w.buf, `,"from_agent":`...)
	w.str(string(e.FromAgent))
	w.buf = append(w.buf, `,"to_agent":`...)
	w.str(string(e.ToAgent))
	w.buf = append(w.buf, `,"timestamp":`...)
	if err := w.timestamp(e.Timestamp.UTC()); err != nil {
		return err
	}
	w.buf = append(w.buf, `,"trace_id":`...)
	w.str(e.TraceID)
	w.buf = append(w.buf, `,"request_id":`...)
	w.str(e.RequestID)
	w.buf = append(w.buf, `,"type":`...)
	w.str(string(e.Type))
	w.buf = append(w.buf, `,"payload":`...)
	if err := w.payload(e.Payload); err != nil {
		return err
	}
	if len(e.XCustomFields) > 0 {
		w.buf = append(w.buf, `,"x_custom_fields":`...)
		if err := w.value(e.XCustomFields); err != nil {
			return err
		}
	}
	w.buf = append(w.buf, '}')
	return nil
}

// AppendPayload appends p to dst as Encode writes it in an envelope: the JSON of
// encoding/json with HTML escaping off. The stores use it for the payloads they keep.
func AppendPayload(dst []byte, p Payload) ([]byte, error) {
	w := envelopeWriter{buf: dst}
	if err := w.payload(p); err != nil {
		return dst, err
	}
	return w.buf, nil
}

// payload appends p, by hand for the three payloads that make up most traffic.
func (w *envelopeWriter) payload(p Payload) error {
	switch p := p.(type) {
	case *WorkRequest:
		if p != nil {
			return w.workRequest(p)
		}
	case *WorkStatus:
		if p != nil {
			w.workStatus(p)
			return nil
		}
	case *WorkResult:
		if p != nil {
			w.workResult(p)
			return nil
		}
	}
	return w.value(p)
}

func (w *envelopeWriter) workRequest(p *WorkRequest) error {
	w.buf = append(w.buf, `{"task_id":`...)
	w.str(p.TaskID)
	w.buf = append(w.buf, `,"work_type":`...)
	w.str(p.WorkType)
	if len(p.Parameters) > 0 {
		w.buf = append(w.buf, `,"parameters":`...)
		if err := w.value(p.Parameters); err != nil {
			return err
		}
	}
	if p.Hints != nil {
		w.buf = append(w.buf, `,"hints":`...)
		if err := w.hints(p.Hints); err != nil {
			return err
		}
	}
	w.buf = append(w.buf, '}')
	return nil
}

// hints appends what Hints.MarshalJSON writes: one object whose keys, the named hints
// that are set and those of Extra, come in sorted order, a set named hint replacing an
// Extra member of the same name.
func (w *envelopeWriter) hints(h *Hints) error {
	var named [3]string
	keys := named[:0]
	if h.AgentID != "" {
		keys = append(keys, "agent_id")
	}
	if h.MaxDurationSeconds != 0 {
		keys = append(keys, "max_duration_seconds")
	}
	if h.MaxMemoryMB != 0 {
		keys = append(keys, "max_memory_mb")
	}
	if len(h.Extra) > 0 {
		all := make([]string, len(keys), len(keys)+len(h.Extra))
		copy(all, keys)
		for k := range h.Extra {
			if !slices.Contains(keys, k) {
				all = append(all, k)
			}
		}
		slices.Sort(all)
		keys = all
	}
	w.buf = append(w.buf, '{')
	for i, k := range keys {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		w.str(k)
		w.buf = append(w.buf, ':')
		switch {
		case k == "agent_id" && h.AgentID != "":
			w.str(h.AgentID)
		case k == "max_duration_seconds" && h.MaxDurationSeconds != 0:
			w.buf = strconv.AppendInt(w.buf, h.MaxDurationSeconds, 10)
		case k == "max_memory_mb" && h.MaxMemoryMB != 0:
			w.buf = strconv.AppendInt(w.buf, h.MaxMemoryMB, 10)
		default:
			if err := w.value(h.Extra[k]); err != nil {
				return err
			}
		}
	}
	w.buf = append(w.buf, '}')
	return nil
}

func (w *envelopeWriter) workStatus(p *WorkStatus) {
	w.buf = append(w.buf, `{"task_id":`...)
	w.str(p.TaskID)
	w.buf = append(w.buf, `,"status":`...)
	w.str(p.Status)
	w.buf = append(w.buf, `,"progress_percent":`...)
	w.buf = strconv.AppendInt(w.buf, int64(p.ProgressPercent), 10)
	w.buf = append(w.buf, `,"step":{"number":`...)
	w.buf = strconv.AppendInt(w.buf, p.Step.Number, 10)
	w.buf = append(w.buf, `,"name":`...)
	w.str(p.Step.Name)
	w.buf = append(w.buf, `,"output":`...)
	w.str(p.Step.Output)
	if p.Step.OutputChunk != "" {
		w.buf = append(w.buf, `,"output_chunk":`...)
		w.str(p.Step.OutputChunk)
	}
	w.buf = append(w.buf, "}}"...)
}

func (w *envelopeWriter) workResult(p *WorkResult) {
	w.buf = append(w.buf, `{"task_id":`...)
	w.str(p.TaskID)
	w.buf = append(w.buf, `,"status":`...)
	w.str(p.Status)
	w.buf = append(w.buf, `,"exit_code":`...)
	w.buf = strconv.AppendInt(w.buf, p.ExitCode, 10)
	w.buf = append(w.buf, `,"output":`...)
	w.str(p.Output)
	if r := p.ResourcesUsed; r != nil {
		w.buf = append(w.buf, `,"resources_used":{"duration_seconds":`...)
		w.buf = strconv.AppendInt(w.buf, r.DurationSeconds, 10)
		w.buf = append(w.buf, `,"gpu_vram_mb":`...)
		w.buf = strconv.AppendInt(w.buf, r.GPUVRAMMB, 10)
		w.buf = append(w.buf, `,"cpu_time_ms":`...)
		w.buf = strconv.AppendInt(w.buf, r.CPUTimeMS, 10)
		w.buf = append(w.buf, '}')
	}
	w.buf = append(w.buf, '}')
}

// timestamp appends t as time.Time.MarshalJSON does. That method refuses a year that is
// not four digits wide; errSlowPath lets encoding/json report it in its own words.
func (w *envelopeWriter) timestamp(t time.Time) error {
	b, ok := jsonw.AppendTime(w.buf, t)
	if !ok {
		return errSlowPath
	}
	w.buf = b
	return nil
}

// value appends v as encoding/json writes it with HTML escaping off.
func (w *envelopeWriter) value(v any) error {
	var err error
	w.buf, err = jsonw.AppendValue(w.buf, v)
	return err
}

// str appends s as a JSON string exactly as encoding/json does with HTML escaping off.
func (w *envelopeWriter) str(s string) { w.buf = jsonw.AppendString(w.buf, s) }

// sizeHint guesses the encoded size of e, so that the buffer is allocated once in the
// common case. Text grows by an eighth to leave room for escapes such as "\n".
func sizeHint(e *Envelope) int {
	text := len(e.ProtocolVersion) + len(e.MessageID) + len(e.FromAgent) + len(e.ToAgent) +
		len(e.TraceID) + len(e.RequestID) + len(e.Type)
	n := 192 + 64*len(e.XCustomFields) // member names, timestamp, free-form members
	switch p := e.Payload.(type) {
	case *WorkRequest:
		if p != nil {
			text += len(p.TaskID) + len(p.WorkType)
			n += 64 + 64*len(p.Parameters)
			if p.Hints != nil {
				n += 96 + 64*len(p.Hints.Extra)
			}
		}
	case *WorkStatus:
		if p != nil {
			text += len(p.TaskID) + len(p.Status) + len(p.Step.Name) + len(p.Step.Output) + len(p.Step.OutputChunk)
			n += 128
		}
	case *WorkResult:
		if p != nil {
			text += len(p.TaskID) + len(p.Status) + len(p.Output)
			n += 160
		}
	default:
		n += 256
	}
	return n + text + text/8
}
