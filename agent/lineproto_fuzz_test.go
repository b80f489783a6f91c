package agent

import (
	"bytes"
	"strings"
	"testing"
)

// progressRecorder is a Progress that records what a line protocol reported.
type progressRecorder struct {
	out     bytes.Buffer
	percent []int
	steps   []string
}

func (p *progressRecorder) Write(b []byte) (int, error) { return p.out.Write(b) }
func (p *progressRecorder) SetPercent(n int)            { p.percent = append(p.percent, n) }
func (p *progressRecorder) Step(name string)            { p.steps = append(p.steps, name) }

// FuzzLineProtocol feeds a subprocess's stdout, split at arbitrary points, to the
// ::progress/::step line parser: it never panics, the output holds no protocol line,
// no byte appears that the process did not write, and how the stream is split does not
// change the result.
func FuzzLineProtocol(f *testing.F) {
	for _, s := range []string{
		"hello\n::progress 40 Installing\nworld\n::step Testing\n{\"ok\":true}\n",
		"::progress 101%\n::progress -5\n::progress x y\n::step \n::step\n",
		"no newline at the end", "\r\n::progress 1e3\r\n", strings.Repeat("x", maxLine+10) + "\n::step s\n",
	} {
		f.Add([]byte(s), uint16(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		whole := &progressRecorder{}
		lp := &lineProtocol{p: whole}
		_, _ = lp.Write(data)
		lp.close()
		_ = lp.structured()

		parts := &progressRecorder{}
		lp2 := &lineProtocol{p: parts}
		n := int(split)%16 + 1
		for b := data; len(b) > 0; {
			k := min(n, len(b))
			_, _ = lp2.Write(b[:k])
			b = b[k:]
		}
		lp2.close()

		if len(data) <= maxLine && !bytes.Equal(whole.out.Bytes(), parts.out.Bytes()) {
			t.Fatalf("output depends on how stdout was split:\nwhole %q\nparts %q", whole.out.Bytes(), parts.out.Bytes())
		}
		if whole.out.Len() > len(data) {
			t.Fatalf("output %d bytes from %d bytes of stdout", whole.out.Len(), len(data))
		}
		for _, line := range strings.Split(whole.out.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, "::step "); ok && strings.TrimSpace(rest) != "" && len(data) <= maxLine {
				t.Fatalf("a ::step line reached the output: %q", line)
			}
		}
	})
}
