package taskview

import (
	"bytes"
	"io"
	"sync"
)

// lineMux interleaves the outputs of several sources on one writer by whole
// lines, each line prefixed with its source's name: "infra-1: text". A source's
// partial line is held until its newline comes, the source is closed, or it
// passes maxHeldLine (then what is held goes out as a line of its own), so a line is never cut by another source's and a reader
// can follow one agent by its prefix.
type lineMux struct {
	mu  sync.Mutex
	out io.Writer
	err error
}

// newLineMux returns a lineMux writing to out.
func newLineMux(out io.Writer) *lineMux { return &lineMux{out: out} }

// source returns the writer of source name: what it is given goes to the mux's
// writer by lines prefixed with "name: ".
func (m *lineMux) source(name string) *prefixWriter {
	return &prefixWriter{mux: m, prefix: []byte(name + ": ")}
}

// prefixWriter is one source of a lineMux.
type prefixWriter struct {
	mux    *lineMux
	prefix []byte
	held   []byte // the partial line not written yet
}

// Write writes the lines p completes, each prefixed, and holds the rest; it
// reports len(p) unless the mux's writer failed, whose first error it returns
// from then on.
func (w *prefixWriter) Write(p []byte) (int, error) {
	m := w.mux
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(p)
	for len(p) > 0 && m.err == nil {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.held = append(w.held, p...)
			if len(w.held) > maxHeldLine {
				w.writeLine(nil)
			}
			break
		}
		w.writeLine(p[:i+1])
		p = p[i+1:]
	}
	if m.err != nil {
		return 0, m.err
	}
	return n, nil
}

// Close writes the source's partial line, if it holds one, ended with a newline.
func (w *prefixWriter) Close() error {
	m := w.mux
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(w.held) > 0 {
		w.writeLine(nil)
	}
	return m.err
}

// writeLine writes the prefix, the held partial line and end (a newline when
// end is empty) as one line; the caller holds the mux's lock.
func (w *prefixWriter) writeLine(end []byte) {
	if len(end) == 0 {
		end = []byte{'\n'}
	}
	line := make([]byte, 0, len(w.prefix)+len(w.held)+len(end))
	line = append(append(append(line, w.prefix...), w.held...), end...)
	w.held = w.held[:0]
	if m := w.mux; m.err == nil {
		_, m.err = m.out.Write(line)
	}
}
