package output_test

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/output"
)

// checkChunks checks that chunks cover output in order, each valid UTF-8 within limit
// bytes, and that the ranges describe the data.
func checkChunks(t *testing.T, text string, chunks []output.Chunk, limit int) {
	t.Helper()
	var joined strings.Builder
	for i, c := range chunks {
		if len(c.Data) == 0 || len(c.Data) > limit {
			t.Errorf("chunk %d holds %d bytes, want 1..%d", i, len(c.Data), limit)
		}
		if !utf8.ValidString(c.Data) {
			t.Errorf("chunk %d (%s) is not valid UTF-8", i, c.Range)
		}
		if c.Range.Start != int64(joined.Len()) || c.Range.Len() != int64(len(c.Data)) || c.Range.Total != int64(len(text)) {
			t.Errorf("chunk %d: range %s for %d bytes at offset %d", i, c.Range, len(c.Data), joined.Len())
		}
		if _, err := envelope.ParseChunkRange(c.Range.String()); err != nil {
			t.Errorf("chunk %d: %v", i, err)
		}
		joined.WriteString(c.Data)
	}
	if joined.String() != text {
		t.Errorf("chunks join to %d bytes that differ from the %d-byte output", joined.Len(), len(text))
	}
}

func TestSplitAlignsOnRunes(t *testing.T) {
	const limit = envelope.MaxChunkSize
	// Multi-byte runes placed so that one straddles each 256 KiB boundary.
	straddle := func(r string, offset int) string {
		return strings.Repeat("a", limit-offset) + strings.Repeat(r, 3) + strings.Repeat("b", limit)
	}
	tests := []struct {
		name  string
		text  string
		sizes []int
	}{
		{"empty", "", nil},
		{"short", "hello", []int{5}},
		{"exactly one chunk", strings.Repeat("x", limit), []int{limit}},
		{"one byte over", strings.Repeat("x", limit+1), []int{limit, 1}},
		{"two-byte rune across the boundary", straddle("é", 1), []int{limit - 1, limit, 2 * 3}},
		{"three-byte rune across the boundary by 1", straddle("€", 1), []int{limit - 1, limit, 3 * 3}},
		{"three-byte rune across the boundary by 2", straddle("€", 2), []int{limit - 2, limit, 3 * 3}},
		{"four-byte rune across the boundary by 3", straddle("😀", 3), []int{limit - 3, limit, 4 * 3}},
		{"four-byte rune ending on the boundary", straddle("😀", 4), []int{limit, limit, 4 * 2}},
		{"all four-byte runes", strings.Repeat("😀", limit/4*3+1), []int{limit, limit, limit, 4}},
		{"all three-byte runes", strings.Repeat("€", limit), []int{limit - 1, limit - 1, limit - 1, 3}},
		// "ab\xff" sanitizes to 5-byte units "ab\uFFFD"; the cut at 256 KiB falls inside
		// the third byte of a U+FFFD.
		{"replacement characters", output.Sanitize([]byte(strings.Repeat("ab\xff", limit/3))), []int{limit - 2, 5*(limit/3) - (limit - 2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks := output.Split(tt.text, limit)
			checkChunks(t, tt.text, chunks, limit)
			var sizes []int
			for _, c := range chunks {
				sizes = append(sizes, len(c.Data))
			}
			if !slices.Equal(sizes, tt.sizes) {
				t.Errorf("chunk sizes = %v, want %v", sizes, tt.sizes)
			}
		})
	}
}

func TestSplitMaxOutOfRangeMeansDefault(t *testing.T) {
	text := strings.Repeat("y", 2*envelope.MaxChunkSize+7)
	for _, limit := range []int{0, -1, 4, envelope.MaxChunkSize + 1, 1 << 30} {
		checkChunks(t, text, output.Split(text, limit), envelope.MaxChunkSize)
		if n := len(output.Split(text, limit)); n != 3 {
			t.Errorf("limit %d: %d chunks, want 3", limit, n)
		}
	}
	checkChunks(t, "héllo wörld", output.Split("héllo wörld", 5), 5)
}

func TestSplitEndsOnInvalidUTF8(t *testing.T) {
	// SplitOutput wants valid UTF-8; given a run of continuation bytes it must still
	// cover the input and stop, not spin.
	text := strings.Repeat("\x80", 20)
	chunks := output.Split(text, 8)
	var joined string
	for _, c := range chunks {
		joined += c.Data
	}
	if joined != text || len(chunks) != 3 {
		t.Errorf("%d chunks joining to %q", len(chunks), joined)
	}
}

func TestSanitize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain\n", "plain\n"},
		{"héllo", "héllo"},
		{"a\xffb", "a\uFFFDb"},
		{"a\xff\xfe\xfdb", "a\uFFFDb"}, // a run of invalid bytes becomes one U+FFFD
		{"\xc3", "\uFFFD"},
		{"\xed\xa0\x80", "\uFFFD"}, // an encoded surrogate is not UTF-8
		{"", ""},
	}
	for _, tt := range tests {
		if got := output.Sanitize([]byte(tt.in)); got != tt.want {
			t.Errorf("SanitizeOutput(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// chunkOf returns the range and data of bytes [a, b) of whole.
func chunkOf(whole string, a, b int) (envelope.ChunkRange, string) {
	return envelope.ChunkRange{Start: int64(a), End: int64(b), Total: int64(len(whole))}, whole[a:b]
}

func TestReassembler(t *testing.T) {
	const whole = "0123456789abcdefghij" // 20 bytes
	type add struct {
		a, b    int
		total   int // 0: len(whole)
		data    string
		wantErr bool
	}
	tests := []struct {
		name     string
		maxTotal int64
		adds     []add
		received int64
		complete bool
	}{
		{"in order", 0, []add{{a: 0, b: 8}, {a: 8, b: 16}, {a: 16, b: 20}}, 20, true},
		{"single chunk", 0, []add{{a: 0, b: 20}}, 20, true},
		{"gap at the start", 0, []add{{a: 5, b: 10, wantErr: true}}, 0, false},
		{"gap in the middle", 0, []add{{a: 0, b: 8}, {a: 10, b: 16, wantErr: true}}, 8, false},
		{"partial overlap", 0, []add{{a: 0, b: 8}, {a: 6, b: 12, wantErr: true}}, 8, false},
		{"identical repeat ignored", 0, []add{{a: 0, b: 8}, {a: 8, b: 16}, {a: 8, b: 16}, {a: 16, b: 20}}, 20, true},
		{"replayed stream ignored", 0, []add{{a: 0, b: 8}, {a: 8, b: 16}, {a: 0, b: 8}, {a: 8, b: 16}, {a: 16, b: 20}}, 20, true},
		{"repeat after completion ignored", 0, []add{{a: 0, b: 20}, {a: 0, b: 20}}, 20, true},
		{"repeat with different content", 0, []add{{a: 0, b: 8}, {a: 0, b: 8, data: "XXXXXXXX", wantErr: true}}, 8, false},
		{"total mismatch", 0, []add{{a: 0, b: 8}, {a: 8, b: 16, total: 30, wantErr: true}}, 8, false},
		{"data shorter than the range", 0, []add{{a: 0, b: 8, data: "0123", wantErr: true}}, 0, false},
		{"total within MaxTotal", 20, []add{{a: 0, b: 20}}, 20, true},
		{"total over MaxTotal", 19, []add{{a: 0, b: 8, wantErr: true}}, 0, false},
		// A rejected first chunk must not fix the total for the chunks after it.
		{"rejected first chunk leaves no trace", 0, []add{{a: 4, b: 8, total: 99, wantErr: true}, {a: 0, b: 20}}, 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &output.Reassembler{MaxTotal: tt.maxTotal}
			for i, a := range tt.adds {
				cr, data := chunkOf(whole, a.a, a.b)
				if a.total != 0 {
					cr.Total = int64(a.total)
				}
				if a.data != "" {
					data = a.data
				}
				err := r.Add(cr, data)
				if (err != nil) != a.wantErr {
					t.Fatalf("add %d (%s): err = %v, want error %v", i, cr, err, a.wantErr)
				}
			}
			if r.Received() != tt.received || r.Complete() != tt.complete {
				t.Errorf("received %d, complete %v; want %d, %v", r.Received(), r.Complete(), tt.received, tt.complete)
			}
			if tt.complete && (r.String() != whole || r.Total() != int64(len(whole))) {
				t.Errorf("reassembled %q (total %d), want %q", r.String(), r.Total(), whole)
			}
		})
	}
}

func TestReassemblerRejectsMalformedRanges(t *testing.T) {
	for _, cr := range []envelope.ChunkRange{
		{Start: -5, End: 0, Total: 10},
		{Start: 5, End: 5, Total: 10},
		{Start: 6, End: 5, Total: 10},
		{Start: 0, End: 11, Total: 10},
	} {
		var r output.Reassembler
		if err := r.Add(cr, strings.Repeat("x", max(0, int(cr.Len())))); err == nil {
			t.Errorf("Add(%+v) accepted a malformed range", cr)
		}
	}
}

func TestReassemblerDoesNotTrustTheAnnouncedTotal(t *testing.T) {
	// A sender announcing a petabyte must not make the receiver allocate it up front.
	var r output.Reassembler
	cr, err := envelope.ParseChunkRange("bytes 0-5 of 1125899906842624")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Add(cr, "hello"); err != nil {
		t.Fatal(err)
	}
	if r.Received() != 5 || r.Complete() {
		t.Errorf("received %d, complete %v", r.Received(), r.Complete())
	}
}

func TestSplitThenReassemble(t *testing.T) {
	text := output.Sanitize([]byte(strings.Repeat("log line é € 😀 \xff\n", 40000)))
	r := output.Reassembler{MaxTotal: 8 << 20}
	for _, c := range output.Split(text, 0) {
		if err := r.Add(c.Range, c.Data); err != nil {
			t.Fatal(err)
		}
	}
	if !r.Complete() || r.String() != text {
		t.Errorf("reassembled %d of %d bytes", r.Received(), len(text))
	}
}
