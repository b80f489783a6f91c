package orchestrator

import (
	"encoding/json"
	"fmt"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/jsonw"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// span is the byte range [start, end) of the output.
type span struct{ start, end int64 }

// coverage records which bytes of a task's output are held, as sorted disjoint spans.
type coverage struct{ spans []span }

func (c *coverage) add(s span) {
	if s.end <= s.start {
		return
	}
	out := make([]span, 0, len(c.spans)+1)
	placed := false
	for _, x := range c.spans {
		switch {
		case x.end < s.start:
			out = append(out, x)
		case s.end < x.start:
			if !placed {
				out = append(out, s)
				placed = true
			}
			out = append(out, x)
		default: // overlapping or adjoining: merge into s
			s.start, s.end = min(s.start, x.start), max(s.end, x.end)
		}
	}
	if !placed {
		out = append(out, s)
	}
	c.spans = out
}

// contiguous is the length of the output held from byte 0 without a gap.
func (c *coverage) contiguous() int64 {
	if len(c.spans) == 0 || c.spans[0].start > 0 {
		return 0
	}
	return c.spans[0].end
}

// complete reports whether exactly bytes [0, total) are held.
func (c *coverage) complete(total int64) bool {
	return len(c.spans) == 1 && c.spans[0].start == 0 && c.spans[0].end == total ||
		total == 0 && len(c.spans) == 0
}

// chunkSeq follows one chunked batch of one step.
type chunkSeq struct {
	base int64 // offset of the batch's byte 0 in the whole output
	r    envelope.Reassembler
}

// placeOutput places a work_status's output at its x_custom_fields.output_offset,
// checking chunk sequences per step. It returns the offset used and the piece, to be
// written with the status (without data when the status carried no output). Called
// with o.mu held.
func (o *Orchestrator) placeOutput(r *run, env *envelope.Envelope, st *envelope.WorkStatus) (*int64, task.Piece, error) {
	data := st.Step.Output
	off, hasOff := xInt(env.XCustomFields, "output_offset")
	if st.Step.OutputChunk != "" {
		cr, err := envelope.ParseChunkRange(st.Step.OutputChunk)
		if err != nil {
			return nil, task.Piece{}, err
		}
		seq := r.seqs[st.Step.Number]
		if cr.Start == 0 {
			seq = &chunkSeq{base: r.cov.contiguous()}
			if hasOff {
				seq.base = off
			}
			r.seqs[st.Step.Number] = seq
		} else if seq == nil {
			return nil, task.Piece{}, fmt.Errorf("step %d: chunk %s arrived without the chunks before it", st.Step.Number, cr)
		}
		if err := seq.r.Add(cr, data); err != nil {
			return nil, task.Piece{}, fmt.Errorf("step %d: %w", st.Step.Number, err)
		}
		if !hasOff {
			off = seq.base + cr.Start
		}
		if seq.r.Complete() {
			delete(r.seqs, st.Step.Number)
		}
	} else if data == "" {
		return nil, task.Piece{}, nil
	} else if !hasOff {
		off = r.cov.contiguous()
	}
	if off < 0 {
		return nil, task.Piece{}, fmt.Errorf("output_offset %d is negative", off)
	}
	r.cov.add(span{off, off + int64(len(data))})
	r.t.OutputBytes = r.cov.contiguous()
	return &off, task.Piece{Offset: off, Data: data}, nil
}

// xInt reads an integer from x_custom_fields.
func xInt(m map[string]any, key string) (int64, bool) {
	switch v := m[key].(type) {
	case json.Number:
		n, err := v.Int64()
		return n, err == nil
	case float64:
		return int64(v), true
	case int64:
		return v, true
	case int:
		return int64(v), true
	}
	return 0, false
}

// structuredOutput reads a work_result's x_custom_fields.structured_output as
// compact JSON; nil when absent or null.
func structuredOutput(env *envelope.Envelope) (json.RawMessage, error) {
	v, ok := env.XCustomFields["structured_output"]
	if !ok || v == nil {
		return nil, nil
	}
	return jsonw.AppendValue(nil, v)
}

// truncation reads a work_result's output_truncated and output_total_bytes.
func truncation(env *envelope.Envelope, res *envelope.WorkResult) (bool, int64) {
	truncated, _ := env.XCustomFields["output_truncated"].(bool)
	total, ok := xInt(env.XCustomFields, "output_total_bytes")
	if !ok {
		total = int64(len(res.Output))
	}
	return truncated, total
}
