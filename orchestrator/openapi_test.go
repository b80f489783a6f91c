package orchestrator_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi/datamodel"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestOpenAPIDocumentIsValidOpenAPI31: the document the API serves without a
// token is valid against the official OpenAPI 3.1 schema, every schema
// in it valid JSON Schema 2020-12, and read by an OpenAPI library without error.
func TestOpenAPIDocumentIsValidOpenAPI31(t *testing.T) {
	e := newEnv(t)
	c := e.client(e.open())
	status, body := call(t, c, http.MethodGet, "/api/v1/openapi.json", "", "")
	if status != http.StatusOK {
		t.Fatalf("GET /api/v1/openapi.json without a token: HTTP %d %s", status, body)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}

	// datamodel embeds the OpenAPI Initiative's schema of 3.1 documents as is.
	meta, err := jsonschema.UnmarshalJSON(strings.NewReader(datamodel.OpenAPI31SchemaData))
	if err != nil {
		t.Fatal(err)
	}
	id := object(meta)["$id"].(string)
	comp := jsonschema.NewCompiler()
	if err := comp.AddResource(id, meta); err != nil {
		t.Fatal(err)
	}
	oas31, err := comp.Compile(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := oas31.Validate(doc); err != nil {
		t.Errorf("not a valid OpenAPI 3.1 document (%s): %v", id, err)
	}
	ct, err := compileContract([]byte(body))
	if err != nil {
		t.Fatalf("a schema: %v", err)
	}

	lib, err := libopenapi.NewDocumentWithConfiguration([]byte(body),
		&datamodel.DocumentConfiguration{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lib.BuildV3Model(); err != nil || lib.GetVersion() != "3.1.0" {
		t.Errorf("libopenapi: version %s: %v", lib.GetVersion(), err)
	}

	// What the JSON schema of documents cannot say: unique operationIds, and each
	// path template's parameters declared.
	ids := map[string]string{}
	for path, item := range object(object(doc)["paths"]) {
		declared := map[string]bool{}
		params, _ := object(item)["parameters"].([]any)
		for i := range params {
			_, param, err := ct.resolve(pointer("paths", path, "parameters", strconv.Itoa(i)))
			if err != nil {
				t.Fatal(err)
			}
			declared[param["name"].(string)] = param["in"] == "path"
		}
		for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
			if !declared[m[1]] {
				t.Errorf("%s: path parameter %s is not declared on the path", path, m[1])
			}
		}
		for method, op := range object(item) {
			if id, ok := object(op)["operationId"].(string); ok {
				if ids[id] != "" {
					t.Errorf("operationId %s twice: %s and %s %s", id, ids[id], method, path)
				}
				ids[id] = method + " " + path
			}
		}
	}
}

// TestOpenAPIListsEveryRouteTheMuxServes: the routes package httpapi registers
// (read from its source: routes is the one place routes are registered) are exactly the document's
// operations, and the real mux serves each documented operation with its own
// route, not the catch-all.
func TestOpenAPIListsEveryRouteTheMuxServes(t *testing.T) {
	registered := routePatterns(t)
	e := newEnv(t)
	h := e.open().Handler()
	mux := h.(*http.ServeMux)
	c := loadContract(t, h)

	var catchAll, routes []string
	for _, p := range registered {
		if strings.Contains(p, " ") {
			routes = append(routes, p)
		} else {
			catchAll = append(catchAll, p)
		}
	}
	if !slices.Equal(catchAll, []string{"/api/"}) {
		t.Errorf("patterns without a method %q: the answer check knows only the /api/ catch-all", catchAll)
	}
	documented := slices.Sorted(maps.Keys(c.ops))
	slices.Sort(routes)
	for _, p := range routes {
		if !slices.Contains(documented, p) {
			t.Errorf("httpapi registers %q, which the document does not list", p)
		}
	}
	for _, p := range documented {
		if !slices.Contains(routes, p) {
			t.Errorf("the document lists %q, which httpapi does not register", p)
		}
	}
	// Every method on every documented path goes to its documented route, or to
	// no route of its own (the catch-all, or net/http's 405).
	paths := map[string]bool{}
	for _, p := range slices.Concat(routes, documented) {
		_, path, _ := strings.Cut(p, " ")
		paths[path] = true
	}
	for path := range paths {
		for _, method := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
			want := method + " " + path
			if method == "HEAD" { // a GET route serves HEAD too
				want = "GET " + path
			}
			if c.ops[want] == nil {
				want = "" // any route without a method
			}
			req := httptest.NewRequest(method, pathParam.ReplaceAllString(path, "00000000-0000-4000-8000-000000000000"), nil)
			if _, got := mux.Handler(req); got != want && (want != "" || strings.Contains(got, " ")) {
				t.Errorf("%s %s is served by the route %q, which the document does not say", method, req.URL.Path, got)
			}
		}
	}
}

// pathParam matches a parameter of a path template, {name}.
var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// routePatterns returns the route patterns httpapi's routes registers, read
// from httpapi's source: every call of route, mux.Handle or mux.HandleFunc in
// it, and every call of route in a method routes hands its route helper to (a
// parameter named route, as routeFleet has). It fails on a pattern that is not
// a literal, or a ServeMux made elsewhere.
func routePatterns(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("httpapi", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var patterns []string
	muxes := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			inRoutes := fd.Name.Name == "routes" && fd.Recv != nil
			registers := inRoutes || fd.Recv != nil && takesAPI(fd)
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if as, ok := n.(*ast.AssignStmt); ok && inRoutes && isRegistration(as.Lhs[0]) {
					return false // the api helper itself, not a route
				}
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "NewServeMux" {
					muxes++
					if !inRoutes {
						t.Errorf("%s: a ServeMux outside routes: register routes in routes", fset.Position(call.Pos()))
					}
				}
				if !registers || !isRegistration(call.Fun) || !inRoutes && !isAPIHelper(call.Fun) {
					return true
				}
				lit, ok := call.Args[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Errorf("%s: a route pattern that is not a string literal", fset.Position(call.Pos()))
					return true
				}
				p, _ := strconv.Unquote(lit.Value)
				patterns = append(patterns, p)
				return true
			})
		}
	}
	if muxes != 1 || len(patterns) == 0 {
		t.Fatalf("found %d ServeMux and %d routes: has httpapi's routes changed shape?", muxes, len(patterns))
	}
	return patterns
}

// takesAPI reports whether fd has a parameter named route: routes' helper,
// handed on to register more routes.
func takesAPI(fd *ast.FuncDecl) bool {
	for _, p := range fd.Type.Params.List {
		for _, n := range p.Names {
			if n.Name == "route" {
				return true
			}
		}
	}
	return false
}

// isAPIHelper reports whether fun is routes' route helper.
func isAPIHelper(fun ast.Expr) bool {
	id, ok := fun.(*ast.Ident)
	return ok && id.Name == "route"
}

// isRegistration reports whether fun is route, mux.Handle or mux.HandleFunc.
func isRegistration(fun ast.Expr) bool {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name == "route"
	case *ast.SelectorExpr:
		x, ok := f.X.(*ast.Ident)
		return ok && x.Name == "mux" && (f.Sel.Name == "Handle" || f.Sel.Name == "HandleFunc")
	}
	return false
}

// TestOpenAPISchemasDescribeTheGoTypes: each component schema has a property for
// each JSON field of its Go type and no other (additionalProperties false, so an
// answer with a field it does not describe fails), requires exactly the fields
// encoding/json always writes, and allows the JSON types the field's Go type
// encodes to (null for a pointer without omitempty; a nil slice or map is not
// written as null by the API).
func TestOpenAPISchemasDescribeTheGoTypes(t *testing.T) {
	c := loadContract(t, newEnv(t).open().Handler())
	cases := []struct {
		schema string
		v      any
	}{
		{"Task", task.Task{}},
		{"Retry", task.Retry{}},
		{"StepInfo", task.StepInfo{}},
		{"Result", task.Result{}},
		{"GPUUse", task.GPUUse{}},
		{"GPU", envelope.GPU{}},
		{"ResourcesUsed", envelope.ResourcesUsed{}},
		{"TaskError", task.TaskError{}},
		{"Hints", task.Hints{}},
		{"SubmitRequest", api.SubmitRequest{}},
		{"CancelRequest", api.CancelRequest{}},
		{"AgentInfo", api.AgentInfo{}},
		{"WorkType", api.WorkType{}},
		{"WorkTypeVariant", api.WorkTypeVariant{}},
		{"ErrorBody", api.ErrorBody{}},
		{"APIErrorDetail", api.APIErrorDetail{}},
		{"Event", task.Event{}},
		{"WorkStatus", envelope.WorkStatus{}},
		{"Step", envelope.Step{}},
		{"WorkResult", envelope.WorkResult{}},
		{"BatchRequest", api.BatchRequest{}},
		{"Batch", api.Batch{}},
		{"BatchTarget", api.BatchTarget{}},
		{"ScheduleSpec", api.ScheduleSpec{}},
		{"Schedule", api.Schedule{}},
		{"Firing", api.Firing{}},
		{"ScheduleWorkflow", api.ScheduleWorkflow{}},
		{"WorkflowSpec", api.WorkflowSpec{}},
		{"WorkflowParam", api.WorkflowParam{}},
		{"WorkflowStep", api.WorkflowStep{}},
		{"WorkflowNeed", api.WorkflowNeed{}},
		{"WorkflowGate", api.WorkflowGate{}},
		{"Workflow", api.Workflow{}},
		{"WorkflowRunRequest", api.WorkflowRunRequest{}},
		{"WorkflowRun", api.WorkflowRun{}},
		{"StepRun", api.StepRun{}},
		{"EnrollRequest", api.EnrollRequest{}},
		{"Enrollment", api.Enrollment{}},
		{"EnrollCode", api.EnrollCode{}},
		{"JoinRequest", api.JoinRequest{}},
		{"JoinGrant", api.JoinGrant{}},
	}
	for _, tc := range cases {
		t.Run(tc.schema, func(t *testing.T) {
			at := pointer("components", "schemas", tc.schema)
			_, s, err := c.resolve(at)
			if err != nil {
				t.Fatal(err)
			}
			if s["additionalProperties"] != false {
				t.Errorf("additionalProperties is not false: an answer's unknown field would pass")
			}
			props := maps.Clone(object(s["properties"]))
			var required []string
			reqs, _ := s["required"].([]any)
			for _, r := range reqs {
				required = append(required, r.(string))
			}
			fields := jsonFields(reflect.TypeOf(tc.v))
			for _, f := range fields {
				prop, ok := props[f.name]
				if !ok {
					t.Errorf("%s (Go %s) is not among the properties", f.name, f.typ)
					continue
				}
				delete(props, f.name)
				if req := slices.Contains(required, f.name); req == f.optional {
					t.Errorf("%s: required in the schema is %v, yet Go leaves it out when empty is %v", f.name, req, f.optional)
				}
				allowed := c.schemaTypes(object(prop))
				for _, want := range goJSONTypes(f.typ, f.optional) {
					if allowed != nil && !slices.Contains(allowed, want) {
						t.Errorf("%s: Go %s encodes to %s, the schema allows %v", f.name, f.typ, want, allowed)
					}
				}
				if goJSONTypes(f.typ, f.optional) == nil && allowed != nil {
					t.Errorf("%s: Go %s holds any JSON value, the schema allows only %v", f.name, f.typ, allowed)
				}
			}
			for name := range props {
				t.Errorf("property %s is no field of Go %T", name, tc.v)
			}
		})
	}
}

// jsonField is a member encoding/json writes for a struct field.
type jsonField struct {
	name     string
	optional bool
	typ      reflect.Type
}

// jsonFields returns the members encoding/json writes for struct type t, the
// fields of an embedded struct among them.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		switch {
		case tag == "-":
			continue
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			out = append(out, jsonFields(f.Type)...)
			continue
		case !f.IsExported():
			continue
		case name == "":
			name = f.Name
		}
		omit := func(o string) bool { return slices.Contains(strings.Split(opts, ","), o) }
		// omitempty leaves a struct value in; omitzero leaves it out when zero.
		optional := omit("omitzero") || omit("omitempty") && f.Type.Kind() != reflect.Struct
		out = append(out, jsonField{name: name, optional: optional, typ: f.Type})
	}
	return out
}

// goJSONTypes returns the JSON types encoding/json writes for a value of t; nil
// for any JSON value.
func goJSONTypes(t reflect.Type, optional bool) []string {
	switch {
	case t == reflect.TypeFor[time.Time]():
		return []string{"string"}
	case t == reflect.TypeFor[json.RawMessage](), t.Kind() == reflect.Interface:
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if optional { // a nil pointer is left out
			return goJSONTypes(t.Elem(), true)
		}
		return append(goJSONTypes(t.Elem(), false), "null")
	case reflect.String:
		return []string{"string"}
	case reflect.Bool:
		return []string{"boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return []string{"integer"}
	case reflect.Float32, reflect.Float64:
		return []string{"number"}
	case reflect.Slice, reflect.Array:
		return []string{"array"}
	}
	return []string{"object"}
}

// schemaTypes returns the JSON types schema s allows, following a $ref; nil for
// any.
func (c *contract) schemaTypes(s map[string]any) []string {
	if ref, ok := s["$ref"].(string); ok && s["type"] == nil {
		if _, target, err := c.resolve(strings.TrimPrefix(ref, "#")); err == nil {
			s = target
		}
	}
	if s["type"] == nil {
		return nil
	}
	if one, ok := s["type"].(string); ok {
		return []string{one}
	}
	var types []string
	for _, ty := range s["type"].([]any) {
		types = append(types, ty.(string))
	}
	return types
}

// TestAnswerCheckRefusesWhatTheDocumentDoesNotSay: the check the API tests run on
// every answer fails an answer with a field, status, content type, header or event
// the document does not describe, and passes one it does.
func TestAnswerCheckRefusesWhatTheDocumentDoesNotSay(t *testing.T) {
	e := newEnv(t)
	h := e.open().Handler()
	c := loadContract(t, h)
	task := "/api/v1/tasks/00000000-0000-4000-8000-000000000000"
	agent := `"id":"code-1","state":"unknown","load":0,"capacity":0,"reported_active":0,"breaker":"closed","last_heartbeat":null`
	output := http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "X-Chiffon-Task-State": {"running"},
		"X-Chiffon-Output-Complete": {"false"}}
	withHeader := func(h http.Header, k, v string) http.Header { h = h.Clone(); h.Set(k, v); return h }
	jsonType := http.Header{"Content-Type": {"application/json"}}
	sse := http.Header{"Content-Type": {"text/event-stream"}}
	event := `id: 1` + "\nevent: state\ndata: "
	cases := []struct {
		name, method, path string
		status             int
		header             http.Header
		body, want         string
	}{
		{"a documented answer", "GET", "/api/v1/agents", 200, jsonType, "[{" + agent + "}]", ""},
		{"a field the document lacks", "GET", "/api/v1/agents", 200, jsonType, "[{" + agent + `,"zone":"eu"}]`, "'zone' not allowed"},
		{"a required field left out", "GET", "/api/v1/agents", 200, jsonType, `[{"id":"code-1"}]`, "missing properties"},
		{"null where it may not be", "GET", task, 200, jsonType, `null`, "want object"},
		{"an undocumented status", "GET", task, 410, jsonType, `{"error":{"code":"not_found","message":"gone"}}`, "HTTP 410 is not documented"},
		{"an error of another shape", "GET", task, 404, jsonType, `{"error":"no such task"}`, "want object"},
		{"an undocumented error code", "GET", task, 404, jsonType, `{"error":{"code":"gone","message":"x"}}`, "value must be one of"},
		{"an undocumented content type", "GET", "/livez", 200, http.Header{"Content-Type": {"text/plain"}}, "ok", `Content-Type "text/plain"`},
		{"a documented text answer", "GET", task + "/output", 200, output, "some output", ""},
		{"a required header left out", "GET", task + "/output", 200, withHeader(output, "X-Chiffon-Output-Complete", ""), "", "header X-Chiffon-Output-Complete is missing"},
		{"a header value not documented", "GET", task + "/output", 200, withHeader(output, "X-Chiffon-Task-State", "done"), "", "header X-Chiffon-Task-State"},
		{"documented events", "GET", task + "/events", 200, sse, event + `{"seq":1,"type":"state","at":"2026-01-02T03:04:05Z","state":"pending"}` + "\n\n", ""},
		{"an event the document lacks", "GET", task + "/events", 200, sse, ": keepalive\n\n" + event + `{"seq":1,"type":"state"}` + "\n\n", "event:"},
		{"the catch-all's answer", "GET", "/api/v1/nothing", 404, jsonType, `{"error":{"code":"not_found","message":"no such API endpoint"}}`, ""},
		{"the catch-all answering 200", "GET", "/api/v1/nothing", 200, jsonType, `{}`, "catch-all"},
		{"a route the mux does not have", "DELETE", "/livez", 200, jsonType, `{}`, "no route matches"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ac := &answerChecker{c: c, mux: h.(*http.ServeMux), next: roundTripFunc(func(req *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: tc.status, Header: tc.header, Request: req,
					Body: io.NopCloser(strings.NewReader(tc.body))}, nil
			})}
			req := httptest.NewRequest(tc.method, "http://chiffon.test"+tc.path, nil)
			req.RequestURI = ""
			resp, err := ac.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadAll(resp.Body)
			got := strings.Join(ac.mismatches(), "\n")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("mismatches %q, want one saying %q", got, tc.want)
			}
		})
	}
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
