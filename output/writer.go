package output

import (
	"unicode/utf8"

	"github.com/chiffon-dev/chiffon/envelope"
)

// Batch is output to send: Data starts at Offset in the task's whole output. When
// Chunked, Data is bytes [Base, Base+len(Data)) of a batch of Total bytes, sent as
// chunks that name their range in it.
type Batch struct {
	Data        string
	Offset      int64
	Base, Total int64
	Chunked     bool
}

// Statuses builds the work_status replies to req carrying b and passes each to
// emit as soon as it is encoded, so the first chunk of a large batch is on the wire
// while the next is encoded. A piece whose envelope is over limit (JSON escaping can
// grow text up to 6x) is cut again at half the size, down to 4 KiB, and the rest of
// the batch keeps the smaller size; each chunk names its own range.
func Statuses(req *envelope.Envelope, ws envelope.WorkStatus, b Batch, limit int, emit func([]byte)) {
	encode := func(st envelope.WorkStatus, off int64, withOffset bool) []byte {
		env := req.Reply(&st)
		if withOffset {
			env.XCustomFields = map[string]any{KeyOffset: off}
		}
		enc, err := envelope.Encode(env)
		if err != nil {
			return nil
		}
		return enc
	}
	if b.Data == "" {
		emit(encode(ws, 0, false))
		return
	}
	if !b.Chunked {
		st := ws
		st.Step.Output = b.Data
		if enc := encode(st, b.Offset, true); enc != nil && len(enc) <= limit {
			emit(enc)
			return
		}
	}
	size := envelope.MaxChunkSize
	if !b.Chunked {
		size /= 2 // it did not fit whole
	}
	for pos := 0; pos < len(b.Data); {
		piece := firstPiece(b.Data[pos:], size)
		st := ws
		r := envelope.ChunkRange{Start: b.Base + int64(pos), End: b.Base + int64(pos+len(piece)), Total: b.Total}
		if !b.Chunked {
			r.Total = int64(len(b.Data))
		}
		st.Step.Output, st.Step.OutputChunk = piece, r.String()
		enc := encode(st, b.Offset+int64(pos), true)
		if (enc == nil || len(enc) > limit) && size > 4<<10 {
			size /= 2
			continue
		}
		emit(enc)
		pos += len(piece)
	}
}

// firstPiece is the first chunk of s at most size bytes long, ending on a rune
// boundary as Split cuts.
func firstPiece(s string, size int) string {
	if len(s) <= size {
		return s
	}
	return Split(s[:min(len(s), size+utf8.UTFMax)], size)[0].Data
}
