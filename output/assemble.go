package output

import (
	"fmt"
	"unicode/utf8"

	"github.com/chiffon-dev/chiffon/envelope"
)

// Span is the byte range [Start, End) of a task's output.
type Span struct{ Start, End int64 }

// Assembler places the output pieces of one task's work_status messages in its whole
// output and keeps track of which bytes are held. A piece goes at its KeyOffset; a
// chunk without one goes after the bytes held when its batch began. Chunks of a batch
// are checked per step (in order, adjoining; a repeat is let through). The Assembler
// keeps no output bytes, only their ranges, so what it holds in memory does not grow
// with what a sender claims or sends. The zero value is empty, unlimited and ready.
type Assembler struct {
	// Limit is the length of output kept, in bytes: bytes at or past it are
	// dropped (Placed.Cut); 0 means no limit.
	Limit int64
	spans []Span // sorted, disjoint, not adjoining
	seqs  map[int64]*chunkSeq
}

// maxNewSpans bounds the pieces one status may add: a piece that would fill more
// gaps than this among the bytes held fills the first ones only. A replay overlaps
// what is held with a gap or two; only a sender that means harm weaves more.
const maxNewSpans = 4

// Placed is a work_status's output as the Assembler placed it.
type Placed struct {
	// Offset is where Data starts in the whole output.
	Offset int64
	// Data is the status's output, less the bytes at or past the Limit (cut on a
	// rune boundary).
	Data string
	// New are the ranges of Data that were not held before, in whole-output
	// offsets: the only bytes worth storing. A repeat has none.
	New []Span
	// Cut says bytes at or past the Limit were dropped.
	Cut bool
}

// Piece returns the bytes of Data in s, one of p.New.
func (p Placed) Piece(s Span) string { return p.Data[s.Start-p.Offset : s.End-p.Offset] }

// chunkSeq follows one chunked batch of one step.
type chunkSeq struct {
	base  int64 // offset of the batch's byte 0 in the whole output
	total int64 // the batch's length, as its first chunk announced it
	have  int64 // bytes of the batch received, from its byte 0
}

// add checks that chunk cr of data follows the batch's chunks so far: 0 <= Start <
// End <= Total, data as long as the range, the same total, no gap and no partial
// overlap. A chunk wholly inside the bytes received is a repeat and passes.
func (s *chunkSeq) add(cr envelope.ChunkRange, data string) error {
	switch {
	case cr.Start < 0 || cr.Start >= cr.End || cr.End > cr.Total:
		return fmt.Errorf("chunk %s: not a valid range", cr)
	case int64(len(data)) != cr.Len():
		return fmt.Errorf("chunk %s holds %d bytes", cr, len(data))
	case cr.Total != s.total:
		return fmt.Errorf("chunk %s: total differs from the %d bytes announced earlier", cr, s.total)
	case cr.Start > s.have:
		return fmt.Errorf("chunk %s leaves a gap: bytes %d-%d are missing", cr, s.have, cr.Start)
	case cr.End <= s.have:
		return nil
	case cr.Start < s.have:
		return fmt.Errorf("chunk %s overlaps the %d bytes already received", cr, s.have)
	}
	s.have = cr.End
	return nil
}

// Place places st's output, read with x (the status's x_custom_fields), in the
// whole output, and records its new bytes below the Limit as held. ok is false when
// st carries no output, or none below the Limit (p.Cut then says so). A chunk that
// does not follow the ones before it in its step is an error, and changes nothing.
func (a *Assembler) Place(x map[string]any, st *envelope.WorkStatus) (p Placed, ok bool, err error) {
	data := st.Step.Output
	off, hasOff := Offset(x)
	switch {
	case st.Step.OutputChunk != "":
		cr, err := envelope.ParseChunkRange(st.Step.OutputChunk)
		if err != nil {
			return Placed{}, false, err
		}
		seq := a.seqs[st.Step.Number]
		if cr.Start == 0 {
			seq = &chunkSeq{base: a.Contiguous(), total: cr.Total}
			if hasOff {
				seq.base = off
			}
		} else if seq == nil {
			return Placed{}, false, fmt.Errorf("step %d: chunk %s arrived without the chunks before it", st.Step.Number, cr)
		}
		if err := seq.add(cr, data); err != nil {
			return Placed{}, false, fmt.Errorf("step %d: %w", st.Step.Number, err)
		}
		if a.seqs == nil {
			a.seqs = map[int64]*chunkSeq{}
		}
		a.seqs[st.Step.Number] = seq
		if !hasOff {
			off = seq.base + cr.Start
		}
		if seq.have == seq.total {
			delete(a.seqs, st.Step.Number)
		}
	case data == "":
		return Placed{}, false, nil
	case !hasOff:
		off = a.Contiguous()
	}
	if off < 0 {
		return Placed{}, false, fmt.Errorf("%s %d is negative", KeyOffset, off)
	}
	p = Placed{Offset: off}
	p.Data, p.Cut = Cut(data, off, a.Limit)
	if p.Data == "" {
		return p, false, nil
	}
	p.New = a.missing(Span{off, off + int64(len(p.Data))})
	for _, s := range p.New {
		a.Add(s)
	}
	return p, true, nil
}

// Cut returns data, whose byte 0 is at off in the whole output, less its bytes at
// or past limit (0: no limit), ending on a rune boundary; cut says bytes were
// dropped.
func Cut(data string, off, limit int64) (kept string, cut bool) {
	if limit <= 0 || off+int64(len(data)) <= limit {
		return data, false
	}
	n := max(limit-off, 0) // < len(data)
	for n > 0 && !utf8.RuneStart(data[n]) {
		n--
	}
	return data[:n], true
}

// missing returns the ranges of s not held, the first maxNewSpans of them.
func (a *Assembler) missing(s Span) []Span {
	var out []Span
	pos := s.Start
	for _, x := range a.spans {
		if x.End <= pos {
			continue
		}
		if x.Start >= s.End || len(out) == maxNewSpans {
			break
		}
		if x.Start > pos {
			out = append(out, Span{pos, x.Start})
		}
		pos = x.End
	}
	if pos < s.End && len(out) < maxNewSpans {
		out = append(out, Span{pos, s.End})
	}
	return out
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
