package output_test

import (
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/output"
)

// logLine is a line of a monitor's log, with quotes and a tag to escape.
const logLine = "2026-01-19T04:21:04Z kuma[1]: monitor \"uptime\" ok <200>\n"

// tenMiB is the output of the chunks phase of chiffon bench: log lines with quotes.
var tenMiB = strings.Repeat(logLine, (10<<20)/len(logLine)+1)[:10<<20]

func BenchmarkSplit(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(tenMiB)))
	for b.Loop() {
		if cs := output.Split(tenMiB, envelope.MaxChunkSize); len(cs) != 40 {
			b.Fatal(len(cs))
		}
	}
}

func BenchmarkReassemble(b *testing.B) {
	chunks := output.Split(tenMiB, envelope.MaxChunkSize)
	b.ReportAllocs()
	b.SetBytes(int64(len(tenMiB)))
	for b.Loop() {
		var r output.Reassembler
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
