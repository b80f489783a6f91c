package httplimit

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/chiffon-dev/chiffon/api"
)

// StreamLimiter caps the open event streams, per API token and in all: each
// holds a goroutine, a connection and, for a task's, a place among its watchers.
type StreamLimiter struct {
	perToken, total int
	// writeTimeout bounds each write of a stream.
	writeTimeout time.Duration
	// caller names the API token of a request.
	caller func(*http.Request) string

	mu      sync.Mutex
	byToken map[string]int
	open    int
}

// NewStreamLimiter caps streams at l.MaxStreamsPerToken per token, as caller
// names a request's token, and l.MaxStreams in all, each write within
// l.WriteTimeout. l is taken as it is: apply WithDefaults first.
func NewStreamLimiter(l Limits, caller func(*http.Request) string) *StreamLimiter {
	return &StreamLimiter{perToken: l.MaxStreamsPerToken, total: l.MaxStreams, writeTimeout: l.WriteTimeout,
		caller: caller, byToken: map[string]int{}}
}

// take counts one more stream of token name, or answers the status that refuses
// it: 429 when the token holds its share, 503 when all are taken.
func (s *StreamLimiter) take(name string) (status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.byToken[name] >= s.perToken:
		return http.StatusTooManyRequests
	case s.open >= s.total:
		return http.StatusServiceUnavailable
	}
	s.byToken[name]++
	s.open++
	return 0
}

func (s *StreamLimiter) give(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open--
	if s.byToken[name]--; s.byToken[name] == 0 {
		delete(s.byToken, name)
	}
}

// Stream serves h, an event stream, within the caps, keyed by the caller's token
// name. A stream outlives the server's WriteTimeout: each of its
// writes gets writeTimeout of its own, so that a client that stops reading still
// lets go. (The server lifts the read deadline itself once a request's body is
// read.)
func (s *StreamLimiter) Stream(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := s.caller(r)
		switch s.take(name) {
		case http.StatusTooManyRequests:
			w.Header().Set("Retry-After", strconv.Itoa(limitRetryAfter))
			api.WriteError(w, http.StatusTooManyRequests, "too_many_streams", "Authorization",
				fmt.Sprintf("this token already holds %d event streams open; close one or try again", s.perToken))
			return
		case http.StatusServiceUnavailable:
			w.Header().Set("Retry-After", strconv.Itoa(limitRetryAfter))
			api.WriteError(w, http.StatusServiceUnavailable, "unavailable", "",
				fmt.Sprintf("%d event streams are open, the most the orchestrator serves; try again", s.total))
			return
		}
		defer s.give(name)
		h(&deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: s.writeTimeout}, r)
	}
}

// deadlineWriter gives each write and flush of an event stream a write deadline
// of its own, in place of the server's WriteTimeout, which counts from the
// request and would end the stream; between writes the stream has none, since
// over HTTP/2 a deadline ends a stream that stays quiet past it.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// within runs send under a write deadline of w.timeout, lifted after. A writer
// in-process without deadlines (the dashboard's relay, a test's recorder)
// needs none.
func (w *deadlineWriter) within(send func()) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	send()
	_ = w.rc.SetWriteDeadline(time.Time{})
}

func (w *deadlineWriter) Write(p []byte) (n int, err error) {
	w.within(func() { n, err = w.ResponseWriter.Write(p) })
	return n, err
}

// Flush sends what was written, within its own deadline.
func (w *deadlineWriter) Flush() {
	w.within(func() { _ = w.rc.Flush() })
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
