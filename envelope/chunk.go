package envelope

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxChunkSize is the largest piece of output one work_status carries: 256 KiB.
const MaxChunkSize = 256 << 10

// maxChunkTotal bounds N in "bytes A-B of N", so sums never overflow.
const maxChunkTotal = 1 << 50

// ChunkRange is the position of one chunk in a whole output: bytes [Start, End) of
// Total, written "bytes A-B of N".
type ChunkRange struct {
	Start, End, Total int64
}

// Len is the number of bytes the chunk holds.
func (r ChunkRange) Len() int64 { return r.End - r.Start }

// Last reports whether the chunk ends the output.
func (r ChunkRange) Last() bool { return r.End == r.Total }

// String formats r as "bytes A-B of N".
func (r ChunkRange) String() string {
	b := make([]byte, 0, 40)
	b = append(b, "bytes "...)
	b = strconv.AppendInt(b, r.Start, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, r.End, 10)
	b = append(b, " of "...)
	b = strconv.AppendInt(b, r.Total, 10)
	return string(b)
}

// ParseChunkRange parses "bytes A-B of N" and checks 0 <= A < B <= N and
// B - A <= MaxChunkSize. Numbers are plain decimals without sign or leading zeros.
func ParseChunkRange(s string) (ChunkRange, error) {
	bad := fmt.Errorf("must be \"bytes A-B of N\", got %q", s)
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return ChunkRange{}, bad
	}
	ab, n, ok := strings.Cut(rest, " of ")
	if !ok {
		return ChunkRange{}, bad
	}
	a, b, ok := strings.Cut(ab, "-")
	if !ok {
		return ChunkRange{}, bad
	}
	var r ChunkRange
	var err error
	if r.Start, err = parseCount(a); err != nil {
		return ChunkRange{}, bad
	}
	if r.End, err = parseCount(b); err != nil {
		return ChunkRange{}, bad
	}
	if r.Total, err = parseCount(n); err != nil {
		return ChunkRange{}, bad
	}
	switch {
	case r.Start >= r.End:
		return ChunkRange{}, fmt.Errorf("%q: start must be below end", s)
	case r.End > r.Total:
		return ChunkRange{}, fmt.Errorf("%q: end is past the total", s)
	case r.Len() > MaxChunkSize:
		return ChunkRange{}, fmt.Errorf("%q: a chunk holds at most %d bytes", s, MaxChunkSize)
	}
	return r, nil
}

func parseCount(s string) (int64, error) {
	if s == "" || len(s) > 1 && s[0] == '0' || len(s) > 16 {
		return 0, errors.New("bad count")
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, errors.New("bad count")
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > maxChunkTotal {
		return 0, errors.New("bad count")
	}
	return n, nil
}

// Chunk is one piece of a chunked output.
type Chunk struct {
	Range ChunkRange
	Data  string
}

// SplitOutput cuts output into chunks of at most max bytes (MaxChunkSize when max is
// out of range) that end on rune boundaries, so each is valid UTF-8 on its own. output
// must be valid UTF-8; see SanitizeOutput. An empty output gives no chunks.
func SplitOutput(output string, max int) []Chunk {
	if max <= utf8.UTFMax || max > MaxChunkSize {
		max = MaxChunkSize
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
			Range: ChunkRange{Start: int64(start), End: int64(end), Total: total},
			Data:  output[start:end],
		})
		start = end
	}
	return chunks
}

// SanitizeOutput turns a process's bytes into valid UTF-8, replacing invalid sequences
// with U+FFFD, since JSON strings cannot carry them.
func SanitizeOutput(b []byte) string {
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
func (r *Reassembler) Add(cr ChunkRange, data string) error {
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
