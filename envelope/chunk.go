package envelope

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
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
