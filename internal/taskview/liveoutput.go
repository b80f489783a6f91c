package taskview

import (
	"bytes"
	"context"
	"io"

	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// LiveOutput puts a task's output together from its status events, each byte once
// and in order, by the events' output offsets: a resumed stream that repeats bytes
// adds nothing, and a piece that arrives past a gap waits for the gap to fill.
// While the task runs it hands on whole lines only, so that a progress line or a
// state line never lands in the middle of one; rest hands on the remainder.
type LiveOutput struct {
	// placed is how many bytes of the output, from byte 0, were placed: handed on
	// or held.
	placed int64
	// held is the last line so far, without its newline yet.
	held []byte
	// ahead are pieces past a gap, by offset; aheadBytes their length.
	ahead      map[int64]string
	aheadBytes int
}

// Bounds on what LiveOutput keeps: a line longer than maxHeldLine is handed on
// unfinished, and pieces past a gap beyond maxAhead are dropped (rest fetches them).
const (
	maxHeldLine = 64 << 10
	maxAhead    = 4 << 20
)

// event places the output e carries and returns the whole lines it completes.
func (o *LiveOutput) Event(e *task.Event) []byte {
	if e.Status == nil || e.Status.Step.Output == "" || e.OutputOffset == nil {
		return nil
	}
	o.place(*e.OutputOffset, e.Status.Step.Output)
	cut := bytes.LastIndexByte(o.held, '\n') + 1
	if cut == 0 && len(o.held) > maxHeldLine {
		cut = len(o.held)
	}
	if cut == 0 {
		return nil
	}
	lines := bytes.Clone(o.held[:cut])
	o.held = append(o.held[:0], o.held[cut:]...)
	return lines
}

// place adds data, which starts at off in the whole output, and then each piece
// waiting ahead that the bytes placed reach.
func (o *LiveOutput) place(off int64, data string) {
	if off > o.placed {
		o.keepAhead(off, data)
		return
	}
	o.append(off, data)
	for len(o.ahead) > 0 {
		reached := false
		for off, data := range o.ahead {
			if off <= o.placed {
				delete(o.ahead, off)
				o.aheadBytes -= len(data)
				o.append(off, data)
				reached = true
			}
		}
		if !reached {
			return
		}
	}
}

// append adds the bytes of data, which starts at off <= placed, past those placed.
func (o *LiveOutput) append(off int64, data string) {
	if end := off + int64(len(data)); end > o.placed {
		o.held = append(o.held, data[o.placed-off:]...)
		o.placed = end
	}
}

// keepAhead keeps data, which starts at off past a gap, while maxAhead allows.
func (o *LiveOutput) keepAhead(off int64, data string) {
	old, ok := o.ahead[off]
	if ok && len(old) >= len(data) || o.aheadBytes+len(data)-len(old) > maxAhead {
		return
	}
	if o.ahead == nil {
		o.ahead = map[int64]string{}
	}
	o.ahead[off] = data
	o.aheadBytes += len(data) - len(old)
}

// rest returns what is left to print once t has ended: the line held, then the
// bytes the events did not carry, read from the output endpoint when t holds more
// than was placed (or holds its output with a gap).
func (o *LiveOutput) Rest(ctx context.Context, c *client.Client, t *task.Task) ([]byte, error) {
	out := o.TakeHeld()
	if t.OutputComplete && t.OutputBytes <= o.placed {
		return out, nil
	}
	buf := &bytes.Buffer{}
	if _, err := c.Output(ctx, t.ID, &skipWriter{skip: o.placed, w: buf}); err != nil {
		return out, err
	}
	o.placed += int64(buf.Len())
	return append(out, buf.Bytes()...), nil
}

// takeHeld returns the line held, unfinished, and holds nothing more.
func (o *LiveOutput) TakeHeld() []byte {
	b := o.held
	o.held = nil
	return b
}

// skipWriter drops the first skip bytes written to it and passes on the others.
type skipWriter struct {
	skip int64
	w    io.Writer
}

func (s *skipWriter) Write(p []byte) (int, error) {
	n := len(p)
	if s.skip >= int64(n) {
		s.skip -= int64(n)
		return n, nil
	}
	_, err := s.w.Write(p[s.skip:])
	s.skip = 0
	return n, err
}
