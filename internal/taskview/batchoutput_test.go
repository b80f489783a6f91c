package taskview

import (
	"bytes"
	"strings"
	"testing"
)

// TestLineMuxPrefixesLinesAndNeverMixesThem: each line gets its source's
// prefix; a partial line is held until its newline, its source's Close or
// maxHeldLine, so another source's line never cuts it.
func TestLineMuxPrefixesLinesAndNeverMixesThem(t *testing.T) {
	type write struct{ src, data string }
	cases := []struct {
		name   string
		writes []write
		closed []string // sources closed at the end, in order
		want   string
	}{
		{"whole lines", []write{{"a", "one\ntwo\n"}, {"b", "three\n"}},
			nil, "a: one\na: two\nb: three\n"},
		{"a line in pieces from one source", []write{{"a", "o"}, {"a", "n"}, {"a", "e\nt"}, {"a", "wo\n"}},
			nil, "a: one\na: two\n"},
		{"a partial line held past another source's line", []write{{"a", "par"}, {"b", "line\n"}, {"a", "tial\n"}},
			nil, "b: line\na: partial\n"},
		{"a partial line at the end written by Close", []write{{"a", "x\ny"}, {"b", "z"}},
			[]string{"b", "a"}, "a: x\nb: z\na: y\n"},
		{"a partial line not closed is not written", []write{{"a", "x\ny"}}, nil, "a: x\n"},
		{"a partial line past maxHeldLine goes out", []write{{"a", strings.Repeat("x", maxHeldLine)}, {"a", "yz"}, {"a", "\n"}},
			nil, "a: " + strings.Repeat("x", maxHeldLine) + "yz\na: \n"},
		{"empty lines keep their prefix", []write{{"a", "\n\n"}}, nil, "a: \na: \n"},
		{"Close of a source without a partial line writes nothing", []write{{"a", "x\n"}},
			[]string{"a", "b"}, "a: x\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			m := newLineMux(&out)
			srcs := map[string]*prefixWriter{"a": m.source("a"), "b": m.source("b")}
			for _, w := range tc.writes {
				if n, err := srcs[w.src].Write([]byte(w.data)); n != len(w.data) || err != nil {
					t.Fatalf("Write %q: %d, %v", w.data, n, err)
				}
			}
			for _, s := range tc.closed {
				if err := srcs[s].Close(); err != nil {
					t.Fatal(err)
				}
			}
			if out.String() != tc.want {
				t.Errorf("output %q, want %q", out.String(), tc.want)
			}
		})
	}
}

// TestAgentOutputWritesEachByteOnce: pieces placed by offset are written once
// each, however they overlap, and a piece past a gap is refused.
func TestAgentOutputWritesEachByteOnce(t *testing.T) {
	var buf bytes.Buffer
	ao := &agentOutput{w: &buf}
	steps := []struct {
		off  int64
		data string
		ok   bool
	}{
		{0, "hello ", true},
		{0, "hello ", true}, // again: nothing new
		{3, "lo wor", true}, // overlaps: "wor" is new
		{6, "world", true},  // "ld" is new
		{20, "late", false}, // past a gap: refused
		{0, "hello world!", true},
	}
	for _, s := range steps {
		if got := ao.add(s.off, []byte(s.data)); got != s.ok {
			t.Errorf("add(%d, %q) = %v, want %v", s.off, s.data, got, s.ok)
		}
	}
	if buf.String() != "hello world!" || ao.written != int64(len("hello world!")) {
		t.Fatalf("written %q (%d), want %q", buf.String(), ao.written, "hello world!")
	}
}
