package taskview

import (
	"bytes"
	"io"
	"sync"
)

// lineMux interleaves the outputs of several sources on one writer by whole
// lines, each line prefixed with its source's name: "infra-1: text". A source's
// partial line is written at once; when another source writes before it ends
// the line, the line is ended there (a newline) and the rest, when it comes,
// starts a new prefixed line. So lines never mix mid-line and nothing waits.
type lineMux struct {
	mu  sync.Mutex
	out io.Writer
	// open is the source whose partial line ends out; nil at a line's start.
	open *prefixWriter
	err  error
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
}

// Write writes p by lines, each prefixed; it reports len(p) unless the mux's
// writer failed, whose first error it returns from then on.
func (w *prefixWriter) Write(p []byte) (int, error) {
	m := w.mux
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(p)
	for len(p) > 0 && m.err == nil {
		if m.open != w {
			if m.open != nil {
				m.write([]byte{'\n'}) // another source's partial line ends here
			}
			m.write(w.prefix)
			m.open = w
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			m.write(p)
			break
		}
		m.write(p[:i+1])
		m.open, p = nil, p[i+1:]
	}
	if m.err != nil {
		return 0, m.err
	}
	return n, nil
}

// Close ends the source's partial line, if it has one, with a newline.
func (w *prefixWriter) Close() error {
	m := w.mux
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open == w {
		m.write([]byte{'\n'})
		m.open = nil
	}
	return m.err
}

// write writes p to out, keeping the first error; the caller holds mu.
func (m *lineMux) write(p []byte) {
	if m.err == nil {
		_, m.err = m.out.Write(p)
	}
}
