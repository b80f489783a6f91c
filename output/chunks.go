package output

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/chiffon-dev/chiffon/envelope"
)

// Chunk is one piece of a chunked output.
type Chunk struct {
	Range envelope.ChunkRange
	Data  string
}

// Split cuts output into chunks of at most max bytes (envelope.MaxChunkSize when max is
// out of range) that end on rune boundaries, so each is valid UTF-8 on its own. output
// must be valid UTF-8; see Sanitize. An empty output gives no chunks.
func Split(output string, max int) []Chunk {
	if max <= utf8.UTFMax || max > envelope.MaxChunkSize {
		max = envelope.MaxChunkSize
	}
	total := int64(len(output))
	chunks := make([]Chunk, 0, (len(output)+max-1)/max)
	for start := 0; start < len(output); {
		end := start + max
		if end >= len(output) {
			end = len(output)
		} else {
			// A rune start lies at most UTFMax-1 bytes back in valid UTF-8. The bound
			// keeps invalid input (a long run of continuation bytes) from stalling.
			for i := 1; i < utf8.UTFMax && !utf8.RuneStart(output[end]); i++ {
				end--
			}
			if !utf8.RuneStart(output[end]) {
				end = start + max
			}
		}
		chunks = append(chunks, Chunk{
			Range: envelope.ChunkRange{Start: int64(start), End: int64(end), Total: total},
			Data:  output[start:end],
		})
		start = end
	}
	return chunks
}

// Sanitize turns a process's bytes into valid UTF-8, replacing invalid sequences
// with U+FFFD, since JSON strings cannot carry them.
func Sanitize(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// reassemblyPrealloc bounds the buffer a Reassembler allocates on a sender's word.
const reassemblyPrealloc = 16 << 20

// Reassembler rebuilds one chunked output. Chunks must arrive in order and adjoin. A
// chunk wholly inside the bytes already held, with the same content, is accepted and
// ignored, so that a stream replayed after a retry can be fed again.
type Reassembler struct {
	// MaxTotal bounds the output size accepted; 0 means no bound.
	MaxTotal int64

	total int64
	buf   []byte
}

// Add appends one chunk. It fails on a range that is not 0 <= Start < End <= Total, a
// data length that differs from the range, a gap, a partial overlap, a repeat with
// different content, a total that differs from earlier chunks, or a total over
// MaxTotal. A rejected chunk leaves the Reassembler as it was.
func (r *Reassembler) Add(cr envelope.ChunkRange, data string) error {
	if cr.Start < 0 || cr.Start >= cr.End || cr.End > cr.Total {
		return fmt.Errorf("chunk %s: not a valid range", cr)
	}
	if int64(len(data)) != cr.Len() {
		return fmt.Errorf("chunk %s holds %d bytes", cr, len(data))
	}
	have := int64(len(r.buf))
	switch {
	case r.buf == nil && r.MaxTotal > 0 && cr.Total > r.MaxTotal:
		return fmt.Errorf("chunked output of %d bytes exceeds the %d-byte limit", cr.Total, r.MaxTotal)
	case r.buf != nil && cr.Total != r.total:
		return fmt.Errorf("chunk %s: total differs from the %d bytes announced earlier", cr, r.total)
	case cr.Start > have:
		return fmt.Errorf("chunk %s leaves a gap: bytes %d-%d are missing", cr, have, cr.Start)
	case cr.End <= have:
		if string(r.buf[cr.Start:cr.End]) != data {
			return fmt.Errorf("chunk %s overlaps earlier bytes with different content", cr)
		}
		return nil
	case cr.Start < have:
		return fmt.Errorf("chunk %s overlaps the %d bytes already received", cr, have)
	}
	if r.buf == nil {
		// The total comes from the sender: preallocate it up to reassemblyPrealloc
		// (growing a 10 MiB output by doubling copied 15 MiB), and let append grow
		// the buffer past that as bytes actually arrive.
		r.total = cr.Total
		r.buf = make([]byte, 0, min(cr.Total, reassemblyPrealloc))
	}
	r.buf = append(r.buf, data...)
	return nil
}

// Received is the number of bytes held so far.
func (r *Reassembler) Received() int64 { return int64(len(r.buf)) }

// Total is the announced size of the whole output, or 0 before the first chunk.
func (r *Reassembler) Total() int64 { return r.total }

// Complete reports whether every byte of the output has arrived.
func (r *Reassembler) Complete() bool { return r.buf != nil && int64(len(r.buf)) == r.total }

// String returns the bytes received so far.
func (r *Reassembler) String() string { return string(r.buf) }
