package task

import "strings"

// What a store keeps of a status event: its output is kept once, as its piece of the
// task's output, and the event keeps only its length. Stored in the event as well,
// 256 KiB of output that JSON escapes (up to six bytes a byte) could not fit one
// message or value.

// StoredEvent is an event as a store keeps it: without a status's output, whose
// length OutputLen is.
type StoredEvent struct {
	*Event
	OutputLen int64 `json:"output_len,omitempty"`
}

// StoredForm returns what a store keeps for ev: ev itself, or a StoredEvent of a
// copy without the output of a status whose output is saved as the piece at
// ev.OutputOffset.
func StoredForm(ev *Event) any {
	if ev.Status == nil || ev.Status.Step.Output == "" || ev.OutputOffset == nil {
		return ev
	}
	st, c := *ev.Status, *ev
	st.Step.Output = ""
	c.Status = &st
	return StoredEvent{Event: &c, OutputLen: int64(len(ev.Status.Step.Output))}
}

// StoredPiece is a piece of a task's output as a store holds it.
type StoredPiece struct {
	Start int64
	Data  []byte
}

// SliceOutput returns bytes [off, off+n) of the output held in pieces (in offset
// order), stopping at a gap: a StoredEvent's output, read back.
func SliceOutput(pieces []StoredPiece, off, n int64) string {
	var b strings.Builder
	pos, end := off, off+n
	for _, p := range pieces {
		pend := p.Start + int64(len(p.Data))
		if pend <= pos {
			continue
		}
		if p.Start > pos || pos >= end {
			break
		}
		take := min(pend, end)
		b.Write(p.Data[pos-p.Start : take-p.Start])
		pos = take
	}
	return b.String()
}
