package envelope_test

import (
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
)

// tenMiB is the output of the chunks phase of chiffon bench: log lines with quotes.
var tenMiB = strings.Repeat(logLine, (10<<20)/len(logLine)+1)[:10<<20]

func BenchmarkSplitOutput(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(tenMiB)))
	for b.Loop() {
		if cs := envelope.SplitOutput(tenMiB, envelope.MaxChunkSize); len(cs) != 40 {
			b.Fatal(len(cs))
		}
	}
}

func BenchmarkReassemble(b *testing.B) {
	chunks := envelope.SplitOutput(tenMiB, envelope.MaxChunkSize)
	b.ReportAllocs()
	b.SetBytes(int64(len(tenMiB)))
	for b.Loop() {
		var r envelope.Reassembler
		for _, c := range chunks {
			if err := r.Add(c.Range, c.Data); err != nil {
				b.Fatal(err)
			}
		}
		if !r.Complete() {
			b.Fatal("incomplete")
		}
	}
}
