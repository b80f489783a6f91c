package ui

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// events relays a task's event stream (the API's, which this page's script
// follows) under the session's cookie, since a browser's EventSource sends no
// token. The output of a status that ends before the page's tail (?tail=offset)
// is left out: the page has it, or shows only the last 64 KiB. Last-Event-ID,
// which EventSource sends when it reconnects, resumes the stream; ?after=N does
// on the first connection.
func (u *UI) events(w http.ResponseWriter, r *http.Request, sess *session) {
	id := r.PathValue("id")
	tailStart, _ := strconv.ParseInt(r.URL.Query().Get("tail"), 10, 64)
	req := apiRequest(r.Context(), sess, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id)+"/events", nil)
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		req.Header.Set("Last-Event-ID", last)
	} else if after := r.URL.Query().Get("after"); after != "" {
		req.Header.Set("Last-Event-ID", after)
	}
	u.relay(w, req, func(block []string) string { return relayBlock(block, tailStart) })
}

// relay serves the API's event stream that req asks for, event by event, each
// as edit makes it; an answer of the API other than 200 is passed on as it is.
func (u *UI) relay(w http.ResponseWriter, req *http.Request, edit func(block []string) string) {
	pr, pw := io.Pipe()
	sw := &streamWriter{header: http.Header{}, pw: pw, started: make(chan int, 1), page: http.NewResponseController(w)}
	go func() {
		u.api.ServeHTTP(sw, req)
		sw.WriteHeader(http.StatusNoContent) // if it wrote nothing
		_ = pw.Close()
	}()
	defer pr.Close() // a relay that stops makes the API's writes fail, and it ends
	if status := <-sw.started; status != http.StatusOK {
		for _, k := range []string{"Content-Type", "Retry-After"} { // a stream refused for a cap says when to retry
			if v := sw.header.Get(k); v != "" {
				w.Header().Set(k, v)
			}
		}
		w.WriteHeader(status)
		_, _ = io.Copy(w, pr)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64<<10), 16<<20) // a status carries up to 256 KiB of output, escaped
	var block []string
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			block = append(block, line)
			continue
		}
		if _, err := io.WriteString(w, edit(block)+"\n"); err != nil {
			return
		}
		flusher.Flush()
		block = block[:0]
	}
}

// relayBlock is one event of the API's stream as the page gets it: a status's
// output dropped when it ends before tailStart.
func relayBlock(block []string, tailStart int64) string {
	var out strings.Builder
	for _, line := range block {
		if data, ok := strings.CutPrefix(line, "data: "); ok && tailStart > 0 {
			var ev task.Event
			if json.Unmarshal([]byte(data), &ev) == nil && ev.Status != nil && ev.OutputOffset != nil &&
				*ev.OutputOffset+int64(len(ev.Status.Step.Output)) <= tailStart {
				ev.Status.Step.Output = ""
				if b, err := json.Marshal(&ev); err == nil {
					line = "data: " + string(b)
				}
			}
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	return out.String()
}

// streamWriter is the ResponseWriter of the API's event stream relayed in this
// process: it writes into a pipe and says once what status the stream began with.
// The write deadlines the API's stream sets apply to the page's connection,
// which carries the stream on: the server's write timeout would end it.
type streamWriter struct {
	header  http.Header
	pw      *io.PipeWriter
	started chan int
	sent    bool
	page    *http.ResponseController
}

// SetWriteDeadline sets the write deadline of the page's connection.
func (s *streamWriter) SetWriteDeadline(t time.Time) error { return s.page.SetWriteDeadline(t) }

func (s *streamWriter) Header() http.Header { return s.header }

func (s *streamWriter) WriteHeader(status int) {
	if !s.sent {
		s.sent = true
		s.started <- status
	}
}

func (s *streamWriter) Write(p []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	return s.pw.Write(p)
}

// Flush does nothing: every Write reaches the relay at once.
func (s *streamWriter) Flush() {}
