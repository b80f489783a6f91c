package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/internal/taskview"
	"github.com/chiffon-dev/chiffon/worktype"
)

// The API's codes of the 422 answers that exit with exitParamError.
const (
	codeInvalidParameter = "invalid_parameter"
	codeUnknownWorkType  = "unknown_work_type"
)

// paramSchema is what typing --param k=v needs of a work type's parameter
// schema: its top-level fields by name, and whether it takes others.
type paramSchema struct {
	// workType names the work type in messages: "code/count".
	workType string
	fields   map[string]worktype.Field
	// closed is additionalProperties: false without patternProperties: a name
	// not in fields is refused.
	closed bool
}

// newParamSchema reads the schema of workType's parameters.
func newParamSchema(workType string, schema map[string]any) *paramSchema {
	s := &paramSchema{workType: workType, fields: map[string]worktype.Field{}}
	for _, f := range worktype.Fields(schema) {
		s.fields[f.Name] = f
	}
	_, patterns := schema["patternProperties"]
	s.closed = schema["additionalProperties"] == false && !patterns
	return s
}

// convert reads text, the value of --param name=text, as the field's type; a
// name the schema does not declare keeps text.
func (s *paramSchema) convert(name, text string) (any, error) {
	f, ok := s.fields[name]
	if !ok {
		return text, nil
	}
	v, err := f.Convert(text)
	if err != nil {
		return nil, &worktype.ParamError{Pointer: paramPointer(name), Message: err.Error()}
	}
	return v, nil
}

// checkNames refuses, when the schema is closed, a parameter it does not
// declare, naming those it does.
func (s *paramSchema) checkNames(params map[string]any) error {
	if !s.closed {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(params)) {
		if _, ok := s.fields[name]; ok {
			continue
		}
		takes := "none"
		if len(s.fields) > 0 {
			takes = strings.Join(slices.Sorted(maps.Keys(s.fields)), ", ")
		}
		return &worktype.ParamError{Pointer: paramPointer(name),
			Message: fmt.Sprintf("not a parameter of %s, which takes %s", s.workType, takes)}
	}
	return nil
}

// paramPointer is the JSON pointer (RFC 6901) of parameter name.
func paramPointer(name string) string {
	return "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}

// lookupParamSchema is the schema the orchestrator's catalogue gives the
// parameters of work type name of agent type to; nil, without error, when it
// has none: an orchestrator older than the catalogue (404), a work type no
// agent declares, or one declared without a schema. The --param k=v then stay
// strings.
func lookupParamSchema(ctx context.Context, c *client.Client, to, name string) (*paramSchema, error) {
	list, served, err := fetchWorkTypes(ctx, c)
	if err != nil || !served {
		return nil, err
	}
	wt := findWorkType(list, to, name)
	if wt == nil || wt.Parameters == nil {
		return nil, nil
	}
	return newParamSchema(taskview.WorkText(to, name), wt.Parameters), nil
}

// typedParams reads the parameters again, by the schema the orchestrator has of
// the work type, when a --param k=v is given; otherwise, and without a schema,
// they stay as request read them. A value its field's type refuses is a
// *worktype.ParamError.
func (tf *taskFlags) typedParams(ctx context.Context, c *client.Client, req api.SubmitRequest) (map[string]any, error) {
	if !slices.ContainsFunc(tf.params, isTextPair) {
		return req.Parameters, nil
	}
	s, err := lookupParamSchema(ctx, c, string(req.ToAgent), req.WorkType)
	if err != nil || s == nil {
		return req.Parameters, err
	}
	return parseKeyValues(tf.paramsJS, tf.params, s)
}

// explainParams gives a parameter error, the CLI's or the orchestrator's (422
// invalid_parameter or unknown_work_type), the exit code exitParamError and says
// it as "parameter /n: got string, want integer". --json still reports the
// API's code, field and pointer.
func explainParams(err error) error {
	var (
		ee *exitError
		pe *worktype.ParamError
		ae *client.APIError
	)
	switch {
	case err == nil || errors.As(err, &ee):
		return err
	case errors.As(err, &pe):
		return exitCode(exitParamError, err)
	case errors.As(err, &ae) && ae.Status == http.StatusUnprocessableEntity &&
		(ae.Code == codeInvalidParameter || ae.Code == codeUnknownWorkType):
		msg := ae.Field + ": " + ae.Message
		if ae.Pointer != "" {
			msg = "parameter " + ae.Pointer + ": " + ae.Message
		}
		return exitCode(exitParamError, &explainedError{msg: msg + " (HTTP 422)", err: err})
	}
	return err
}
