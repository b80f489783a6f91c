package output

import (
	"fmt"

	"github.com/chiffon-dev/chiffon/envelope"
)

// Span is the byte range [Start, End) of a task's output.
type Span struct{ Start, End int64 }

// Assembler places the output pieces of one task's work_status messages in its whole
// output and keeps track of which bytes are held. A piece goes at its KeyOffset; a
// chunk without one goes after the bytes held when its batch began. Chunks of a batch
// are checked per step (in order, adjoining, a repeat identical). The zero value is
// empty and ready.
type Assembler struct {
	spans []Span // sorted, disjoint, not adjoining
	seqs  map[int64]*chunkSeq
}

// chunkSeq follows one chunked batch of one step.
type chunkSeq struct {
	base int64 // offset of the batch's byte 0 in the whole output
	r    Reassembler
}

// Place returns the offset in the whole output of st's output, read from x (the
// status's x_custom_fields), and records its bytes as held. ok is false when st
// carries no output. A chunk that does not follow the ones before it in its step is
// an error, and changes nothing.
func (a *Assembler) Place(x map[string]any, st *envelope.WorkStatus) (off int64, ok bool, err error) {
	data := st.Step.Output
	off, hasOff := Offset(x)
	switch {
	case st.Step.OutputChunk != "":
		cr, err := envelope.ParseChunkRange(st.Step.OutputChunk)
		if err != nil {
			return 0, false, err
		}
		seq := a.seqs[st.Step.Number]
		if cr.Start == 0 {
			seq = &chunkSeq{base: a.Contiguous()}
			if hasOff {
				seq.base = off
			}
		} else if seq == nil {
			return 0, false, fmt.Errorf("step %d: chunk %s arrived without the chunks before it", st.Step.Number, cr)
		}
		if err := seq.r.Add(cr, data); err != nil {
			return 0, false, fmt.Errorf("step %d: %w", st.Step.Number, err)
		}
		if a.seqs == nil {
			a.seqs = map[int64]*chunkSeq{}
		}
		a.seqs[st.Step.Number] = seq
		if !hasOff {
			off = seq.base + cr.Start
		}
		if seq.r.Complete() {
			delete(a.seqs, st.Step.Number)
		}
	case data == "":
		return 0, false, nil
	case !hasOff:
		off = a.Contiguous()
	}
	if off < 0 {
		return 0, false, fmt.Errorf("%s %d is negative", KeyOffset, off)
	}
	a.Add(Span{off, off + int64(len(data))})
	return off, true, nil
}

// Add records the bytes of s as held (as a store read them back after a restart).
func (a *Assembler) Add(s Span) {
	if s.End <= s.Start {
		return
	}
	out := make([]Span, 0, len(a.spans)+1)
	placed := false
	for _, x := range a.spans {
		switch {
		case x.End < s.Start:
			out = append(out, x)
		case s.End < x.Start:
			if !placed {
				out = append(out, s)
				placed = true
			}
			out = append(out, x)
		default: // overlapping or adjoining: merge into s
			s.Start, s.End = min(s.Start, x.Start), max(s.End, x.End)
		}
	}
	if !placed {
		out = append(out, s)
	}
	a.spans = out
}

// Replace forgets every byte and batch held and holds bytes [0, n): a result that
// carries the whole output replaces what was streamed.
func (a *Assembler) Replace(n int64) {
	a.spans, a.seqs = nil, nil
	a.Add(Span{0, n})
}

// Restart forgets the chunked batches under way, keeping the bytes held: the agent
// is asked for the output again and its batches start over.
func (a *Assembler) Restart() { a.seqs = nil }

// Empty reports whether no byte is held.
func (a *Assembler) Empty() bool { return len(a.spans) == 0 }

// Contiguous is the length of the output held from byte 0 without a gap.
func (a *Assembler) Contiguous() int64 {
	if len(a.spans) == 0 || a.spans[0].Start > 0 {
		return 0
	}
	return a.spans[0].End
}

// Complete reports whether exactly bytes [0, total) are held.
func (a *Assembler) Complete(total int64) bool {
	return len(a.spans) == 1 && a.spans[0].Start == 0 && a.spans[0].End == total ||
		total == 0 && len(a.spans) == 0
}
