package agent

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// Output timing of a subprocess.
const (
	// outputPause is how long a stream may stay quiet in the middle of a line before
	// the part of the line it wrote is output (a prompt, "Checking... ").
	outputPause = 100 * time.Millisecond
	// outputDrain is how long the pipes are read for their end once the process has
	// exited and its descendants are killed. Whoever still holds a pipe then is a
	// process the agent could not attribute to the task: the agent stops reading
	// rather than wait for it.
	outputDrain = 100 * time.Millisecond
	// drainLimit bounds what is read from a pipe after outputDrain, for a writer that
	// is still running.
	drainLimit = 1 << 20
	// readSize is the most read from a pipe at once: a Linux pipe's default capacity.
	readSize = 64 << 10
)

// outputMerge is the one reader of a process's stdout and stderr. The agent makes
// the pipes itself, rather than let os/exec copy each in a goroutine of its own,
// so that one loop reads both: two goroutines woken together run in either order,
// and each copy cuts lines at its own buffer's size.
//
// It writes whole lines only, so that a line of one stream is never cut by a line
// of the other; a partial line goes out when its stream pauses, ends or passes
// maxLine. When both streams hold complete lines at the same moment it takes one
// line from each in turn, stdout first (see writeLines). That is the order of
// `echo out; echo err >&2`, though not always the order the lines were written
// in: across two pipes no reader can know it (docs/agent.md).
type outputMerge struct {
	stdout, stderr *os.File        // write ends, for the process
	streams        [2]*mergeStream // stdout's read end, stderr's
	wake           *os.File        // read end of finishing
	wakeFd         int
	finishing      *os.File // closed by finish
	done           chan struct{}
	turn           int    // the stream whose line goes next
	reads          uint64 // reads of either pipe so far
	// pause is outputPause and drain outputDrain; tests change them.
	pause, drain time.Duration
}

// mergeStream is one of the pipes an outputMerge reads.
type mergeStream struct {
	f      *os.File // owns fd, which the loop reads without the runtime's poller
	fd     int
	w      io.Writer
	paused func()    // called after a pause's partial line is written; may be nil
	buf    []byte    // read and not yet written: at most a partial line between loops
	off    int       // buf[:off] is written
	seen   time.Time // when bytes last came
	// checked and got number the last read of the pipe and the last that brought
	// bytes, among the reads of both pipes.
	checked, got uint64
	eof          bool
}

// newOutputMerge makes the pipes. The caller hands m.stdout and m.stderr to the
// process, then calls closeWriteEnds, then start or, if the process did not
// start, close.
func newOutputMerge() (m *outputMerge, err error) {
	m = &outputMerge{streams: [2]*mergeStream{{}, {}}, done: make(chan struct{}), pause: outputPause, drain: outputDrain}
	var files []*os.File
	defer func() {
		if err != nil {
			for _, f := range files {
				f.Close()
			}
		}
	}()
	for _, ends := range []struct{ r, w **os.File }{
		{&m.streams[0].f, &m.stdout}, {&m.streams[1].f, &m.stderr}, {&m.wake, &m.finishing},
	} {
		if *ends.r, *ends.w, err = os.Pipe(); err != nil {
			return nil, err
		}
		files = append(files, *ends.r, *ends.w)
	}
	for i, fd := range []*int{&m.streams[0].fd, &m.streams[1].fd, &m.wakeFd} {
		// The descriptor stays the file's, open until close. The pipe is
		// non-blocking, as os.Pipe makes it.
		rc, err := files[2*i].SyscallConn()
		if err == nil {
			err = rc.Control(func(d uintptr) { *fd = int(d) })
		}
		if err != nil {
			return nil, err
		}
	}
	return m, nil
}

// closeWriteEnds closes the agent's copies of the process's ends, once it has its
// own, so that the pipes end when the writers do.
func (m *outputMerge) closeWriteEnds() {
	m.stdout.Close()
	m.stderr.Close()
}

// start starts reading: stdout's lines go to stdout, which is told when stdout
// pauses mid-line, and stderr's to stderr. finish stops it.
func (m *outputMerge) start(stdout *lineProtocol, stderr io.Writer) {
	m.streams[0].w, m.streams[0].paused, m.streams[1].w = stdout, stdout.pause, stderr
	go m.loop()
}

// finish tells the reader that the process and its descendants have ended: it
// reads what the pipes hold and their end for at most m.drain, then stops. It
// returns once the read ends are closed and everything read is written.
func (m *outputMerge) finish() {
	m.finishing.Close() // wakes the loop
	<-m.done
}

// close closes the read ends and the wake pipe, when start is not to be called.
func (m *outputMerge) close() {
	m.closeReadEnds()
	m.finishing.Close()
}

func (m *outputMerge) closeReadEnds() {
	for _, s := range m.streams {
		s.f.Close()
	}
	m.wake.Close()
}

func (m *outputMerge) loop() {
	defer close(m.done)
	defer m.closeReadEnds()
	fds := []unix.PollFd{{Fd: int32(m.streams[0].fd), Events: unix.POLLIN},
		{Fd: int32(m.streams[1].fd), Events: unix.POLLIN}, {Fd: int32(m.wakeFd), Events: unix.POLLIN}}
	var deadline time.Time // set once finish is called
	for !m.streams[0].eof || !m.streams[1].eof {
		now := time.Now()
		if !deadline.IsZero() && !now.Before(deadline) {
			// The drain is over: take what the pipes hold now and leave the rest to
			// whoever keeps writing.
			for _, s := range m.streams {
				for n := 0; !s.eof && n < drainLimit; {
					k := m.read(s)
					if k == 0 {
						break
					}
					n += k
				}
			}
			break
		}
		for i, s := range m.streams {
			if s.eof {
				fds[i].Fd = -1 // poll ignores it
			}
		}
		if _, err := unix.Poll(fds, m.timeout(now, deadline)); err != nil && err != unix.EINTR {
			break
		}
		if fds[2].Revents != 0 {
			fds[2].Fd = -1
			deadline = time.Now().Add(m.drain)
		}
		for i, s := range m.streams {
			if fds[i].Revents != 0 {
				m.read(s)
			}
		}
		m.writeLines(time.Now())
	}
	for _, s := range m.streams {
		s.eof = true // the last line goes out without its newline
	}
	m.writeLines(time.Now())
}

// timeout is how long poll may wait: until the drain ends, or until a stream
// holding a partial line has paused; -1 is for ever.
func (m *outputMerge) timeout(now, deadline time.Time) int {
	var until time.Time
	if !deadline.IsZero() {
		until = deadline
	}
	for _, s := range m.streams {
		if len(s.buf) > 0 && !s.eof {
			if t := s.seen.Add(m.pause); until.IsZero() || t.Before(until) {
				until = t
			}
		}
	}
	if until.IsZero() {
		return -1
	}
	// Round up: waking a millisecond early would only poll again.
	return int((max(0, until.Sub(now)) + time.Millisecond - 1) / time.Millisecond)
}

// writeLines writes the complete lines held, one from each stream in turn, then
// the partial lines that are over maxLine, paused or at their stream's end. Lines
// go out without one of the other stream's taking its turn only once the other
// stream has been read since they came, and held no line: it wrote nothing
// before them.
func (m *outputMerge) writeLines(now time.Time) {
	for {
		a, b := m.streams[m.turn], m.streams[1-m.turn]
		switch {
		case !a.hasLine() && !b.hasLine():
		case a.hasLine() && (b.hasLine() || b.readSince(a)):
			a.writeLine(!b.hasLine())
			m.turn = 1 - m.turn
			continue
		case b.hasLine() && a.readSince(b):
			b.writeLine(true)
			continue
		case a.hasLine():
			m.read(b)
			continue
		default:
			m.read(a)
			continue
		}
		break
	}
	for _, s := range m.streams {
		if s.off > 0 {
			s.buf, s.off = s.buf[:copy(s.buf, s.buf[s.off:])], 0
		}
		switch {
		case s.eof || len(s.buf) > maxLine:
			s.writePartial()
		case len(s.buf) > 0 && now.Sub(s.seen) >= m.pause:
			s.writePartial()
			if s.paused != nil {
				s.paused()
			}
		}
	}
}

// read reads once from s's pipe, without waiting, and returns how many bytes
// came; 0 also when nothing was there.
func (m *outputMerge) read(s *mergeStream) int {
	m.reads++
	s.checked = m.reads
	s.buf = slices.Grow(s.buf, readSize)
	for {
		n, err := unix.Read(s.fd, s.buf[len(s.buf):len(s.buf)+readSize])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return 0
		case err != nil || n == 0:
			s.eof = true
			return 0
		}
		s.buf, s.seen, s.got = s.buf[:len(s.buf)+n], time.Now(), m.reads
		return n
	}
}

// readSince reports whether s was read, or ended, after o last got bytes.
func (s *mergeStream) readSince(o *mergeStream) bool { return s.eof || s.checked > o.got }

func (s *mergeStream) hasLine() bool { return bytes.IndexByte(s.buf[s.off:], '\n') >= 0 }

// writeLine writes the first complete line held or, when all, every one.
func (s *mergeStream) writeLine(all bool) {
	rest := s.buf[s.off:]
	i := bytes.IndexByte(rest, '\n')
	if all {
		i = bytes.LastIndexByte(rest, '\n')
	}
	_, _ = s.w.Write(rest[:i+1])
	s.off += i + 1
}

// writePartial writes what is held of a line not ended yet.
func (s *mergeStream) writePartial() {
	if len(s.buf) > 0 {
		_, _ = s.w.Write(s.buf)
		s.buf = s.buf[:0]
	}
}
