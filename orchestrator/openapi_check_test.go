package orchestrator_test

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// docURL is where the schema compiler holds the API's OpenAPI document.
const docURL = "mem:///openapi.json"

// contract is the API's OpenAPI document, as the API serves it, compiled to check
// answers against.
type contract struct {
	doc map[string]any
	// ops are the documented operations by their ServeMux pattern, such as
	// "GET /api/v1/tasks/{id}".
	ops map[string]map[int]*answer
	// catchAll are the answers of the "/api/" catch-all, which refuses a request
	// without a token and says no such endpoint to the rest.
	catchAll map[int]*answer
}

// answer is one documented response.
type answer struct {
	headers []header
	// media holds, by media type, the schema of a JSON body or of the data of each
	// Server-Sent Event; nil for a body checked for its content type only.
	media map[string]*jsonschema.Schema
}

// header is one documented response header.
type header struct {
	name     string
	required bool
	schema   *jsonschema.Schema
}

// loadContract reads the document h serves and compiles it.
func loadContract(t *testing.T, h http.Handler) *contract {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/openapi.json", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /api/v1/openapi.json: HTTP %d %s", rec.Code, rec.Body)
	}
	c, err := compileContract(rec.Body.Bytes())
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return c
}

// compileContract compiles every schema of the document: each is checked against
// JSON Schema 2020-12 as it is, and a $ref that leads nowhere fails.
func compileContract(raw []byte) (*contract, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not a JSON object")
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.AssertFormat()
	if err := comp.AddResource(docURL, doc); err != nil {
		return nil, err
	}
	c := &contract{doc: doc, ops: map[string]map[int]*answer{}, catchAll: map[int]*answer{}}
	for name := range object(object(doc["components"])["schemas"]) {
		if _, err := comp.Compile(docURL + "#" + pointer("components", "schemas", name)); err != nil {
			return nil, err
		}
	}
	for path, item := range object(doc["paths"]) {
		for method, op := range object(item) {
			if !slices.Contains([]string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}, method) {
				continue
			}
			answers := map[int]*answer{}
			for status := range object(object(op)["responses"]) {
				code, err := strconv.Atoi(status)
				if err != nil {
					return nil, fmt.Errorf("%s %s: response %q: document each status the handler writes", method, path, status)
				}
				if answers[code], err = c.answer(comp, pointer("paths", path, method, "responses", status)); err != nil {
					return nil, err
				}
			}
			c.ops[strings.ToUpper(method)+" "+path] = answers
		}
	}
	for code, name := range map[int]string{http.StatusUnauthorized: "Unauthorized", http.StatusNotFound: "NotFound"} {
		if c.catchAll[code], err = c.answer(comp, pointer("components", "responses", name)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// answer compiles the response at ptr, following $refs.
func (c *contract) answer(comp *jsonschema.Compiler, ptr string) (*answer, error) {
	ptr, r, err := c.resolve(ptr)
	if err != nil {
		return nil, err
	}
	a := &answer{media: map[string]*jsonschema.Schema{}}
	for name := range object(r["headers"]) {
		hptr, h, err := c.resolve(ptr + pointer("headers", name))
		if err != nil {
			return nil, err
		}
		s, err := comp.Compile(docURL + "#" + hptr + "/schema")
		if err != nil {
			return nil, err
		}
		a.headers = append(a.headers, header{name: name, required: h["required"] == true, schema: s})
	}
	for mt, m := range object(r["content"]) {
		var at string
		switch {
		case mt == "application/json":
			at = pointer("content", mt, "schema")
		case object(m)["x-chiffon-event-data"] != nil:
			at = pointer("content", mt, "x-chiffon-event-data")
		}
		if at == "" {
			a.media[mt] = nil
			continue
		}
		if a.media[mt], err = comp.Compile(docURL + "#" + ptr + at); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// resolve returns the object at JSON pointer ptr of the document, following a $ref
// in it, and where it is.
func (c *contract) resolve(ptr string) (string, map[string]any, error) {
	for range 8 {
		var v any = c.doc
		for _, tok := range strings.Split(ptr, "/")[1:] {
			if list, ok := v.([]any); ok {
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(list) {
					return "", nil, fmt.Errorf("nothing at #%s", ptr)
				}
				v = list[i]
				continue
			}
			v = object(v)[strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)]
		}
		obj := object(v)
		if obj == nil {
			return "", nil, fmt.Errorf("nothing at #%s", ptr)
		}
		ref, ok := obj["$ref"].(string)
		if !ok {
			return ptr, obj, nil
		}
		ptr = strings.TrimPrefix(ref, "#")
	}
	return "", nil, fmt.Errorf("$ref loop at #%s", ptr)
}

// object returns v as a JSON object; nil when it is something else.
func object(v any) map[string]any { m, _ := v.(map[string]any); return m }

// pointer is the JSON pointer to the given member names.
func pointer(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString("/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(n))
	}
	return b.String()
}

// check checks one answer of the route pattern (as ServeMux.Handler names it)
// against the document. The data of an event stream is checked as it is read;
// fail hears of a mismatch there.
func (c *contract) check(pattern, method string, resp *http.Response, fail func(error)) error {
	var a *answer
	switch {
	case pattern == "": // net/http's own answer: no route for the path or method
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
			return nil
		}
		return fmt.Errorf("no route matches, yet HTTP %d", resp.StatusCode)
	case !strings.Contains(pattern, " "): // the /api/ catch-all
		if a = c.catchAll[resp.StatusCode]; a == nil {
			return fmt.Errorf("the catch-all %q answered HTTP %d, not 401 or 404", pattern, resp.StatusCode)
		}
	default:
		answers, ok := c.ops[pattern]
		if !ok {
			return fmt.Errorf("route %q is not in the document", pattern)
		}
		if a = answers[resp.StatusCode]; a == nil {
			return fmt.Errorf("HTTP %d is not documented for %s", resp.StatusCode, pattern)
		}
	}
	for _, h := range a.headers {
		v := resp.Header.Get(h.name)
		if v == "" {
			if h.required {
				return fmt.Errorf("header %s is missing", h.name)
			}
			continue
		}
		if err := h.schema.Validate(v); err != nil {
			return fmt.Errorf("header %s: %w", h.name, err)
		}
	}
	if len(a.media) == 0 { // documented without a body
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil || len(body) > 0 {
			return fmt.Errorf("a body the document does not describe (%d bytes, %v)", len(body), err)
		}
		return nil
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		return fmt.Errorf("Content-Type %q: %w", resp.Header.Get("Content-Type"), err)
	}
	schema, ok := a.media[mt]
	switch {
	case !ok:
		return fmt.Errorf("Content-Type %q, the document says one of %v", mt, slices.Sorted(maps.Keys(a.media)))
	case schema == nil || method == http.MethodHead:
		return nil
	case mt == "application/json":
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			return err
		}
		return validateJSON(schema, body)
	}
	resp.Body = &eventChecker{ReadCloser: resp.Body, schema: schema, fail: fail}
	return nil
}

// validateJSON checks that data is JSON valid against schema.
func validateJSON(schema *jsonschema.Schema, data []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if len(data) > 200 {
		data = append(data[:200:200], "..."...)
	}
	if err != nil {
		return fmt.Errorf("not JSON: %w: %s", err, data)
	}
	if err := schema.Validate(v); err != nil {
		return fmt.Errorf("%s: %w", data, err)
	}
	return nil
}

// eventChecker checks the data of each Server-Sent Event as the stream is read.
type eventChecker struct {
	io.ReadCloser
	schema *jsonschema.Schema
	fail   func(error)
	line   []byte
}

// Read reads the stream and checks each data line it completes.
func (e *eventChecker) Read(p []byte) (int, error) {
	n, err := e.ReadCloser.Read(p)
	for _, b := range p[:n] {
		if b != '\n' {
			e.line = append(e.line, b)
			continue
		}
		if data, ok := bytes.CutPrefix(e.line, []byte("data: ")); ok {
			if err := validateJSON(e.schema, data); err != nil {
				e.fail(fmt.Errorf("event: %w", err))
			}
		}
		e.line = e.line[:0]
	}
	return n, err
}

// answerChecker is an http.RoundTripper that checks every answer of the API
// against its OpenAPI document and keeps the mismatches.
type answerChecker struct {
	c    *contract
	mux  *http.ServeMux
	next http.RoundTripper
	mu   sync.Mutex
	errs []string
}

// checkAnswers wraps next so that every answer of h, an orchestrator's API, is
// checked against the document it serves; a mismatch fails t when it ends.
func checkAnswers(t *testing.T, h http.Handler, next http.RoundTripper) http.RoundTripper {
	t.Helper()
	mux, ok := h.(*http.ServeMux)
	if !ok {
		t.Fatalf("Handler() is a %T: teach checkAnswers how it finds the route of a request", h)
	}
	ac := &answerChecker{c: loadContract(t, h), mux: mux, next: next}
	t.Cleanup(func() {
		for _, e := range ac.mismatches() {
			t.Errorf("answer not as orchestrator/httpapi/openapi.json says: %s", e)
		}
	})
	return ac
}

// RoundTrip sends req and checks the answer.
func (ac *answerChecker) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := ac.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	_, pattern := ac.mux.Handler(req)
	what := fmt.Sprintf("%s %s: HTTP %d", req.Method, req.URL.RequestURI(), resp.StatusCode)
	fail := func(err error) {
		ac.mu.Lock()
		defer ac.mu.Unlock()
		ac.errs = append(ac.errs, what+": "+err.Error())
	}
	if err := ac.c.check(pattern, req.Method, resp, fail); err != nil {
		fail(err)
	}
	return resp, nil
}

// mismatches returns what the answers so far got wrong.
func (ac *answerChecker) mismatches() []string {
	ac.mu.Lock()
	defer ac.mu.Unlock()
	return slices.Clone(ac.errs)
}
