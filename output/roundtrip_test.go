package output_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/output"
)

// randomText is n bytes or so of valid UTF-8 mixing what output holds: ASCII, runes
// of two to four bytes, and bytes JSON escapes (quotes, tags, control characters,
// which grow to six bytes each).
func randomText(rng *rand.Rand, n int) string {
	pieces := []string{"log line ", "é", "€", "😀", `"`, "<b>", "\x01", "\t", "\n", "0123456789"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

// runeCut moves n back to a rune boundary of s.
func runeCut(s string, n int) int {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// TestWriterThenAssemblerRoundTrip: whatever the output, the size of the agent's
// flushes, the broker's message limit and a replay of everything from the dedupe
// cache, the work_status messages the writer makes each fit the limit and decode, and
// the assembler puts them back into exactly the output, complete.
func TestWriterThenAssemblerRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	req := envelope.New(envelope.Orchestrator, envelope.Code, "", "",
		&envelope.WorkRequest{TaskID: "6f1c2a4e-9b3d-4c1e-8a2f-0d9e8c7b6a51", WorkType: "run"})
	for trial := range 60 {
		text := randomText(rng, rng.IntN(900<<10))
		limit := []int{48 << 10, 200 << 10, 1 << 20}[rng.IntN(3)]
		var msgs [][]byte
		emit := func(enc []byte) {
			if enc == nil {
				t.Fatalf("trial %d: a status did not encode", trial)
			}
			msgs = append(msgs, enc)
		}
		// The live stream: flushes of random size, in steps.
		step := int64(0)
		for off := 0; off < len(text); {
			n := runeCut(text[off:], min(len(text)-off, 1+rng.IntN(400<<10)))
			if n == 0 {
				n = len(text) - off
			}
			data := text[off : off+n]
			if rng.IntN(3) == 0 {
				step++
			}
			ws := envelope.WorkStatus{TaskID: "6f1c2a4e-9b3d-4c1e-8a2f-0d9e8c7b6a51", Status: envelope.StatusRunning,
				Step: envelope.Step{Number: step, Name: "s"}}
			output.Statuses(req, ws, output.Batch{Data: data, Offset: int64(off), Total: int64(len(data)),
				Chunked: len(data) > envelope.MaxChunkSize}, limit, emit)
			off += n
		}
		live := len(msgs)
		// A replay from the dedupe cache: the whole output again, piece by piece.
		ws := envelope.WorkStatus{TaskID: "6f1c2a4e-9b3d-4c1e-8a2f-0d9e8c7b6a51", Status: envelope.StatusRunning,
			Step: envelope.Step{Number: 0, Name: "replay"}}
		for _, c := range output.Split(text, envelope.MaxChunkSize) {
			output.Statuses(req, ws, output.Batch{Data: c.Data, Offset: c.Range.Start, Base: c.Range.Start,
				Total: int64(len(text)), Chunked: true}, limit, emit)
		}

		var a output.Assembler
		got := make([]byte, len(text))
		for i, m := range msgs {
			if len(m) > limit {
				t.Fatalf("trial %d: message %d is %d bytes, over the %d-byte limit", trial, i, len(m), limit)
			}
			env, err := envelope.Decode(m)
			if err != nil {
				t.Fatalf("trial %d: message %d: %v", trial, i, err)
			}
			st := env.Payload.(*envelope.WorkStatus)
			p, ok, err := a.Place(env.XCustomFields, st)
			if err != nil {
				t.Fatalf("trial %d: message %d (%s): %v", trial, i, st.Step.OutputChunk, err)
			}
			if !ok {
				continue
			}
			off := p.Offset
			if off+int64(len(st.Step.Output)) > int64(len(got)) {
				t.Fatalf("trial %d: message %d placed past the end", trial, i)
			}
			copy(got[off:], st.Step.Output)
			if end := off + int64(len(st.Step.Output)); i < live && a.Contiguous() != end {
				t.Fatalf("trial %d: live message %d ends at %d, but %d bytes are held without a gap", trial, i, end, a.Contiguous())
			}
		}
		if !a.Complete(int64(len(text))) || string(got) != text {
			t.Fatalf("trial %d: %d bytes, limit %d: complete %v, equal %v", trial, len(text), limit,
				a.Complete(int64(len(text))), string(got) == text)
		}
	}
}
