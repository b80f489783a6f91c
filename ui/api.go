package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/chiffon-dev/chiffon/api"
)

// apiError is an answer of the API other than a success.
type apiError struct {
	status  int
	code    string
	message string
	// field and pointer name what a refused request got wrong, when the API
	// says: "parameters" and "/n".
	field, pointer string
	// candidates are the whole ids an ambiguous short id or prefix names.
	candidates []string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.code, e.message) }

// recorder is the ResponseWriter of an API call made in this process: it keeps
// the status, the headers and the body, or with tail > 0 only the body's last
// tail bytes and its length.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	tail   int
	total  int64
}

func (rec *recorder) Header() http.Header { return rec.header }

func (rec *recorder) WriteHeader(status int) {
	if rec.status == 0 {
		rec.status = status
	}
}

func (rec *recorder) Write(p []byte) (int, error) {
	rec.WriteHeader(http.StatusOK)
	rec.total += int64(len(p))
	rec.body.Write(p)
	if rec.tail > 0 && rec.body.Len() > 2*rec.tail {
		keep := rec.body.Bytes()[rec.body.Len()-rec.tail:]
		rest := append([]byte(nil), keep...)
		rec.body.Reset()
		rec.body.Write(rest)
	}
	return len(p), nil
}

// tailBytes is the body's last tail bytes, less the bytes of a character cut
// at their start.
func (rec *recorder) tailBytes() []byte {
	b := rec.body.Bytes()
	if rec.tail > 0 && len(b) > rec.tail {
		b = b[len(b)-rec.tail:]
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
		}
	}
	return b
}

// apiRequest is an API request on behalf of sess, with its token.
func apiRequest(ctx context.Context, sess *session, method, path string, body io.Reader) *http.Request {
	r, _ := http.NewRequestWithContext(ctx, method, path, body) // path is ours: it parses
	r.Header.Set("Authorization", "Bearer "+sess.token)
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	} else {
		r.Body = http.NoBody // as a server's request has: a standby forwarding it reads it
	}
	return r
}

// call makes an API request on behalf of sess and decodes its JSON answer into
// out; an answer other than 2xx is an *apiError.
func (u *UI) call(ctx context.Context, sess *session, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	rec := &recorder{header: http.Header{}}
	u.api.ServeHTTP(rec, apiRequest(ctx, sess, method, path, body))
	if rec.status < 200 || rec.status > 299 {
		var e api.ErrorBody
		_ = json.Unmarshal(rec.body.Bytes(), &e)
		return &apiError{status: rec.status, code: e.Error.Code, message: e.Error.Message, field: e.Error.Field, pointer: e.Error.Pointer,
			candidates: e.Error.Candidates}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(rec.body.Bytes(), out)
}
